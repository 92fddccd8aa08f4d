"""R5.1, R5.4, R12.3, R8.4: a tour with three tool steps runs them, streams and stores every
call and clean result, really changes the file, and the next tour replays them in history."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.agent_e2e._tours import (
    named,
    run_tour,
    scripted_chat,
    stored_variant,
    tool_messages,
    upstream_bodies,
)

DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"
SCRIPT = [
    {"match": "edit", "step": 0, "text": "Let me look.",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"match": "edit", "step": 1,
     "tool_calls": [{"name": "write_diff", "arguments": {"path": "notes.txt", "diff": DIFF}}]},
    {"match": "edit", "step": 2,
     "tool_calls": [{"name": "shell", "arguments": {"command": "cat notes.txt; wc -l < notes.txt"}}]},
    {"match": "edit", "step": 3, "text": "Done: beta is now BETA."},
    {"match": "changed", "text": "I changed one line."},
]
RESULTS = {
    "call_0_0": "alpha\nbeta\ngamma\n",
    "call_1_0": "applied 1 hunk to notes.txt (+1/-1 lines)",
    "call_2_0": "alpha\nBETA\ngamma\n3\n",
}
NAMES = {"call_0_0": "read_file", "call_1_0": "write_diff", "call_2_0": "shell"}


async def test_r5_1_three_tool_steps_run_stream_store_and_replay(
        client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    chat = await scripted_chat(client, SCRIPT)
    tour_id, events = await run_tour(client, chat, "please edit my notes")

    names = [n for i, (n, _) in enumerate(events) if n != "delta" or events[i - 1][0] != "delta"]
    assert names == ["tour", "delta", "tool_call", "tool_result", "tool_call", "tool_result",
                     "tool_call", "tool_result", "delta", "message", "done"]
    calls = named(events, "tool_call")
    assert [(c["id"], c["name"]) for c in calls] == list(NAMES.items())
    assert json.loads(calls[1]["arguments"]) == {"path": "notes.txt", "diff": DIFF}
    assert {r["id"]: r["content"] for r in named(events, "tool_result")} == RESULTS
    final = "Done: beta is now BETA."
    assert "".join(d["text"] for d in named(events, "delta")) == "Let me look." + final
    assert named(events, "message")[0]["content"] == final
    assert named(events, "done")[0]["finish_reason"] == "stop"

    assert (workspace / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"

    variant = await stored_variant(client, chat)
    assert variant["content"] == final and variant["tour_id"] == tour_id
    steps = variant["steps"]
    assert len(steps) == 3
    for step, (call_id, name) in zip(steps, NAMES.items(), strict=True):
        [call] = step["tool_calls"]
        assert (call["id"], call["name"]) == (call_id, name)
        assert call["arguments"] == next(c["arguments"] for c in calls if c["id"] == call_id)
        [result] = step["results"]
        assert (result["id"], result["content"]) == (call_id, RESULTS[call_id])
    assert steps[0]["text"] == "Let me look."

    # Within the tour, each step's request carries the calls and results so far.
    bodies = await upstream_bodies(client, tour_id)
    assert len(bodies) == 4
    assert tool_messages(bodies[3]) == RESULTS

    next_id, _ = await run_tour(client, chat, "what changed?")
    [body] = await upstream_bodies(client, next_id)
    replay = [m for m in body["messages"] if m["role"] in ("user", "assistant", "tool")]
    assert [m["role"] for m in replay] == ["user", "assistant", "tool", "assistant", "tool",
                                          "assistant", "tool", "assistant", "user"]
    assert replay[0]["content"] == "please edit my notes"
    assert replay[1]["content"] == "Let me look."
    for i, call_id in enumerate(NAMES):
        assistant, tool = replay[1 + 2 * i], replay[2 + 2 * i]
        [call] = assistant["tool_calls"]
        assert call["id"] == call_id and call["function"]["name"] == NAMES[call_id]
        assert call["function"]["arguments"] == calls[i]["arguments"]
        assert tool == {"role": "tool", "tool_call_id": call_id, "content": RESULTS[call_id]}
    assert replay[7] == {"role": "assistant", "content": final}
    assert replay[8]["content"] == "what changed?"


async def test_r12_4_non_stream_result_lists_the_tool_steps(
        client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    chat = await scripted_chat(client, SCRIPT)
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "edit"}, "stream": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["content"] == "Done: beta is now BETA." and body["finish_reason"] == "stop"
    assert [s["results"][0]["content"] for s in body["steps"]] == list(RESULTS.values())
    stored = (await stored_variant(client, chat))["steps"]
    keys = ("text", "tool_calls", "results")
    assert [{k: s[k] for k in keys} for s in stored] == [{k: s[k] for k in keys}
                                                         for s in body["steps"]]
