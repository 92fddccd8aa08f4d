"""R6.5–R6.8 through the real API: {no rule, soft, hard, both} × {stream, non-stream} ×
{answer with, without tool calls}: what is stored, streamed, executed and sent upstream."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.core import Core
from evacore.rules import interrupt_message, reminder_block, validate_rule
from tests.rules_integration.helpers import (
    add_rule,
    clear_rules,
    fired,
    generate,
    messages,
    new_chat,
)

SOFT = {"name": "soft_probe", "scope": "tool:write_file", "condition": r'"path":"notes\.txt"',
        "text": "SOFT REMINDER: prefer write_diff."}
HARD = {"name": "hard_probe", "scope": "text", "condition": "FORBIDDEN",
        "text": "HARD INTERRUPT: never say that word."}
DISCARDED_TEXT = "FORBIDDEN draft nobody may see"
KEPT_CALL = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "kept answer"}}
DISCARDED_CALL = {"name": "write_file",
                  "arguments": {"path": "notes.txt", "content": "discarded answer"}}


def script(hard: bool, tools: bool) -> list[dict]:
    def calls(call: dict) -> dict:
        return {"tool_calls": [call]} if tools else {}

    return [
        {"match": "system-interrupt", "step": 0, "text": "Clean words here", **calls(KEPT_CALL)},
        {"step": 1, "text": "All done now."},
        {"step": 0, "text": DISCARDED_TEXT if hard else "Plain words here",
         **calls(DISCARDED_CALL if hard else KEPT_CALL)},
    ]


COMBOS = [(stream, tools) for stream in (True, False) for tools in (False, True)]


@pytest.mark.parametrize("kind", ["none", "soft", "hard", "both"])
async def test_r6_5_to_r6_8_matrix_stored_streamed_executed_sent(
    client: httpx.AsyncClient, core: Core, kind: str
) -> None:
    """One rule set per kind; each of {stream, JSON} × {text only, with a tool call} is a tour
    in a chat of its own."""
    await clear_rules(core)
    soft, hard = kind in ("soft", "both"), kind in ("hard", "both")
    if kind == "none":  # the rules exist, but their `when` does not hold in these tours
        await add_rule(client, **SOFT, when=["telegram"])
        await add_rule(client, **{**HARD, "when": ["telegram"]})
    if soft:
        await add_rule(client, **SOFT)
    if hard:
        await add_rule(client, **HARD)
    notes = core.settings.workspace_dir / "notes.txt"
    notes.parent.mkdir(parents=True, exist_ok=True)
    for stream, tools in COMBOS:
        notes.write_text("original")
        counts_before = await fired(client)
        await check_one_tour(client, core, soft, hard, stream, tools)
        counts = await fired(client)
        gained = {rule: (counts[rule][0] - counts_before.get(rule, (0, 0))[0],
                         counts[rule][1] - counts_before.get(rule, (0, 0))[1]) for rule in counts}
        assert gained.get("soft_probe", (0, 0)) == ((1, 0) if soft and tools else (0, 0))
        assert gained.get("hard_probe", (0, 0)) == ((1, 1) if hard else (0, 0))


async def check_one_tour(client: httpx.AsyncClient, core: Core, soft: bool, hard: bool,
                         stream: bool, tools: bool) -> None:
    case = f"stream={stream} tools={tools}"
    notes = core.settings.workspace_dir / "notes.txt"
    chat = await new_chat(client, script(hard, tools))

    run = await generate(client, chat, "please edit the notes", stream=stream)

    kept_text = "Clean words here" if hard else "Plain words here"
    final = "All done now." if tools else kept_text
    assert run.status == "completed" and run.content == final, case
    # executed: only the kept answer's call ran
    assert notes.read_text() == ("kept answer" if tools else "original"), case
    # stored
    stored = (await messages(client, chat))[-1]
    assert stored["content"] == final, case
    steps = stored["variants"][0]["steps"]
    clean_output = "wrote 11 bytes to notes.txt (replaced)"
    if tools:
        assert len(steps) == 1 and steps[0]["tool_calls"][0]["name"] == "write_file", case
        assert json.loads(steps[0]["tool_calls"][0]["arguments"])["content"] == "kept answer"
        assert steps[0]["results"][0]["content"] == clean_output, case
    else:
        assert steps == [], case
    # streamed (or answered as JSON): nothing discarded, no service insertion
    for forbidden in ("nobody may see", "discarded answer", "system-reminder", "system-interrupt"):
        assert forbidden not in run.raw, case
        assert forbidden not in json.dumps(stored, ensure_ascii=False), case
    if stream:
        assert run.names()[0] == "tour" and run.names()[-2:] == ["message", "done"], case
        assert run.names().count("hold") == (1 if hard else 0), case
        deltas = "".join(d["text"] for d in run.of("delta"))
        assert deltas == (kept_text + "All done now." if tools else kept_text), case
        assert [r["content"] for r in run.of("tool_result")] == ([clean_output] if tools else [])
        assert len(run.of("tool_call")) == (1 if tools else 0), case
    # sent upstream: the interrupt in the retry request, the reminder on the tool result
    requests = run.requests
    assert len(requests) == 1 + hard + tools, case
    sent = json.dumps(requests, ensure_ascii=False)
    assert "nobody may see" not in sent and "discarded answer" not in sent, case
    if hard:
        interrupt = interrupt_message(validate_rule(HARD))
        assert requests[1][-1] == {"role": "user", "content": interrupt}, case
        assert requests[1][:-1] == requests[0], case  # same history, without the discarded answer
    else:
        assert "system-interrupt" not in sent, case
    if tools:
        tool_message = requests[-1][-1]
        assert tool_message["role"] == "tool", case
        expected = (reminder_block(SOFT["name"], SOFT["text"]) + "\n" if soft else "")
        assert tool_message["content"] == expected + clean_output, case
    if not soft:
        assert "system-reminder" not in sent, case
