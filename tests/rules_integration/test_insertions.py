"""R6.5–R6.8 details through the API: the ceiling of one retry, holding speech, and the exact
bytes a real OpenAI-compatible upstream receives (the loopback fake records them)."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.core import Core
from evacore.rules import interrupt_message, reminder_block, validate_rule
from tests.fakes.upstream import FakeUpstream
from tests.rules_integration.helpers import (
    add_rule,
    clear_rules,
    fired,
    generate,
    messages,
    new_chat,
)

HARD_A = {"name": "hard_a", "scope": "text", "condition": "AAA", "text": "Rule A says no."}
HARD_B = {"name": "hard_b", "scope": "text", "condition": "BBB", "text": "Rule B says no."}
WRITE = {"name": "write_file", "arguments": {"path": "n.txt", "content": "x"}}
OUTPUT = "wrote 1 bytes to n.txt (new file)"


@pytest.mark.parametrize("with_call", [True, False], ids=["call", "no_call"])
async def test_r6_8_two_hard_misses_one_retry_second_rule_rides_on_next_result(
    client: httpx.AsyncClient, core: Core, with_call: bool
) -> None:
    await clear_rules(core)
    await add_rule(client, **HARD_A)
    await add_rule(client, **HARD_B)
    calls = {"tool_calls": [WRITE]} if with_call else {}
    chat = await new_chat(client, [
        {"match": "system-interrupt", "step": 0, "text": "BBB second answer", **calls},
        {"step": 1, "text": "finished"},
        {"step": 0, "text": "AAA first answer"},
    ])

    run = await generate(client, chat, "go")

    assert run.content == ("finished" if with_call else "BBB second answer")
    requests = run.requests
    assert len(requests) == (3 if with_call else 2)  # exactly one retry
    assert requests[1][-1]["content"] == interrupt_message(validate_rule(HARD_A))
    # the second miss is kept: streamed delta by delta (the retry is spent, nothing is held)
    assert run.names().count("hold") == 1
    assert "".join(d["text"] for d in run.of("delta")).startswith("BBB second answer")
    stored = (await messages(client, chat))[-1]
    assert "AAA" not in json.dumps(stored) and "AAA" not in run.raw
    if with_call:
        # its rule's text rides, as a reminder, on the result of the call it declared itself
        expected = reminder_block("hard_b", HARD_B["text"]) + "\n" + OUTPUT
        assert requests[2][-1] == {"role": "tool", "tool_call_id": "call_0_0", "content": expected}
        assert stored["variants"][0]["steps"][0]["results"][0]["content"] == OUTPUT
    assert "hard_b" not in json.dumps(requests[:2])
    retries = [f["retry"] for f in run.diagnostics["rules"]["fired"]]
    assert retries == [True, False]
    assert (await fired(client))["hard_a"] == (1, 1)
    assert (await fired(client))["hard_b"] == (1, 0)


async def test_r6_7_no_armed_rule_streams_delta_by_delta(client: httpx.AsyncClient) -> None:
    # the six seeded rules are present; none is armed without telegram / picture flags
    chat = await new_chat(client, [{"text": "one two three four"}])
    run = await generate(client, chat, "hi")
    assert "hold" not in run.names()
    assert [d["text"] for d in run.of("delta")] == ["one ", "two ", "three ", "four"]
    assert run.diagnostics["rules"]["armed"] == []


async def test_r6_7_armed_rule_holds_then_releases_in_one_piece(
    client: httpx.AsyncClient,
) -> None:
    await add_rule(client, name="never_matches", scope="text", condition="ZZZ", text="no")
    chat = await new_chat(client, [
        {"step": 1, "text": "and the rest"},
        {"step": 0, "text": "one two three four", "tool_calls": [WRITE]},
    ])
    run = await generate(client, chat, "hi")
    # each step: `hold`, then its text in one delta, then its declared calls
    assert run.names()[1:] == ["hold", "delta", "tool_call", "tool_result", "hold", "delta",
                               "message", "done"]
    assert [d["text"] for d in run.of("delta")] == ["one two three four", "and the rest"]
    assert run.diagnostics["rules"]["armed"] == ["never_matches"]


async def test_r6_5_r6_6_exact_bytes_sent_to_an_openai_compatible_upstream(
    client: httpx.AsyncClient, core: Core
) -> None:
    await clear_rules(core)
    await add_rule(client, name="soft_w", scope="tool:write_file", text="Use write_diff.")
    await add_rule(client, **HARD_A)
    with FakeUpstream("openai-chat") as fake:
        fake.script.tool_call("write_file", {"path": "n.txt", "content": "x"}, id="call_w")
        fake.script.reply("AAA draft that nobody sees")
        fake.script.reply("All good.")
        r = await client.post("/v1/connections", json={
            "name": "fake", "kind": "openai-chat", "base_url": fake.base_url,
            "api_key": "sk-test", "model": "fake-model"})
        assert r.status_code == 201, r.text
        chat = (await client.post("/v1/chats", json={"connection_id": r.json()["id"]})).json()
        run = await generate(client, chat["id"], "write it")
        bodies = fake.bodies()
    assert run.content == "All good."
    assert len(bodies) == 3
    tool_message = bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_w"
    assert tool_message["content"] == reminder_block("soft_w", "Use write_diff.") + "\n" + OUTPUT
    assert bodies[2]["messages"][:-1] == bodies[1]["messages"]  # same history, then the interrupt
    assert bodies[2]["messages"][-1] == {
        "role": "user", "content": interrupt_message(validate_rule(HARD_A))}
    assert all("nobody sees" not in json.dumps(b) for b in bodies)
    assert [e["content"] for e in run.of("tool_result")] == [OUTPUT]
