"""R5.3, §13: an empty tool output is stored and streamed as "" and shown to the model as
`(empty)`; an output over `context.tool_result_max_chars` is cut in prompts with a note but
stored and streamed whole, in the same tour and when later tours replay it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from evacore.render.tool_results import CUT_NOTE, EMPTY_MARKER
from tests.agent_e2e._tours import (
    named,
    run_tour,
    scripted_chat,
    stored_variant,
    tool_messages,
    upstream_bodies,
)

CAP = 50
BIG = "".join(f"line {i:03d}\n" for i in range(30))  # 270 characters
SCRIPT = [
    {"match": "look", "step": 0, "tool_calls": [
        {"name": "shell", "arguments": {"command": "true"}},
        {"name": "read_file", "arguments": {"path": "big.txt"}},
    ]},
    {"match": "look", "step": 1, "text": "Seen both."},
    {"match": "again", "text": "Still seen."},
]


@pytest.fixture
def context_settings() -> dict[str, Any]:
    return {"tool_result_max_chars": CAP}


async def test_r5_3_empty_and_long_outputs_in_prompts_versus_storage(
        client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "big.txt").write_text(BIG)
    chat = await scripted_chat(client, SCRIPT)
    tour_id, events = await run_tour(client, chat, "look at it")
    clean = {"call_0_0": "", "call_0_1": BIG}
    assert {r["id"]: r["content"] for r in named(events, "tool_result")} == clean
    [step] = (await stored_variant(client, chat))["steps"]
    assert {r["id"]: r["content"] for r in step["results"]} == clean

    in_prompt = {"call_0_0": EMPTY_MARKER,
                 "call_0_1": BIG[:CAP] + CUT_NOTE.format(cut=len(BIG) - CAP, total=len(BIG))}
    bodies = await upstream_bodies(client, tour_id)
    assert tool_messages(bodies[1]) == in_prompt

    next_id, _ = await run_tour(client, chat, "again")
    [replayed] = await upstream_bodies(client, next_id)
    assert tool_messages(replayed) == in_prompt
