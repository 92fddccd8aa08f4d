"""R14.5: any instance answers any request. Two `evacore serve` processes on one database (and
one `serve --workers 2`): a tour streaming on A is read and aborted through B and stops within
a second; a client op sent by A's tour is answered through B and the tour goes on with it,
and answered again through B, while the tour runs or after it ended, it is a 409."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from evacore.config import Settings
from tests.conftest import MASTER_TOKEN, wipe
from tests.helpers import ServerProcess, server_pair

OPS = [{"name": "run", "description": "Run a command on my laptop.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def _chat(server: ServerProcess, script: list[dict[str, Any]]) -> str:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as c:
        conn = c.post("/v1/connections", json={"name": "scripted", "kind": "mock",
                                               "params": {"script": script}}).json()["id"]
        return c.post("/v1/chats", json={"connection_id": conn}).json()["id"]


def _events(lines: Any) -> Any:
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            yield name, json.loads(line[6:])


def _fresh(server: ServerProcess) -> httpx.Client:
    """A client of its own (a new connection: with workers, any process may take it)."""
    return httpx.Client(base_url=server.url, headers=server.headers(), timeout=10)


def _abort_through(streaming: ServerProcess, other: ServerProcess) -> None:
    chat = _chat(streaming, [{"text": "a very slow answer", "delay": 60}])
    with _fresh(streaming) as a, a.stream(
        "POST", f"/v1/chats/{chat}/generate", json={"message": {"content": "hi"}},
        timeout=30) as r:
        assert r.status_code == 200
        events = _events(r.iter_lines())
        name, first = next(events)
        assert name == "tour"
        tour_id = first["tour_id"]
        with _fresh(other) as b:
            assert b.get(f"/v1/tours/{tour_id}").json()["status"] == "running"
            asked = time.monotonic()
            assert b.post(f"/v1/tours/{tour_id}/abort").status_code == 200
        rest = [n for n, _ in events]
        took = time.monotonic() - asked
    assert "error" in rest and took < 1.0, (rest, took)
    with _fresh(other) as b:
        deadline = time.monotonic() + 5
        while b.get(f"/v1/tours/{tour_id}").json()["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert b.get(f"/v1/tours/{tour_id}").json()["status"] == "aborted"


def _client_op_through(streaming: ServerProcess, other: ServerProcess) -> None:
    chat = _chat(streaming, [
        {"step": 0, "tool_calls": [{"name": "client_run", "arguments": {"cmd": "ls"}}]},
        {"step": 1, "text": "The laptop answered."}])
    answered: list[int] = []
    url = ""
    with _fresh(streaming) as a, a.stream(
        "POST", f"/v1/chats/{chat}/generate",
        json={"message": {"content": "list"}, "client_ops": OPS}, timeout=30) as r:
        results, messages = [], []
        for name, data in _events(r.iter_lines()):
            if name == "client_op":
                url = f"/v1/tours/{data['tour_id']}/client-ops/{data['call_id']}"
                with _fresh(other) as b:
                    answered.append(b.post(url, json={"content": "a.txt b.txt"}).status_code)
                    answered.append(b.post(url, json={"content": "again"}).status_code)
            elif name == "tool_result":
                results.append(data["content"])
            elif name == "message":
                messages.append(data["content"])
    assert answered[0] == 200 and answered[1] == 409
    assert results == ["a.txt b.txt"] and messages == ["The laptop answered."]
    with _fresh(other) as b:  # the tour has ended: the call it made is still no stranger
        late = b.post(url, json={"content": "late"})
        never = b.post(url.rsplit("/", 1)[0] + "/call_9_9", json={"content": "?"})
    assert (late.status_code, never.status_code) == (409, 404)


@pytest.fixture
def pair(settings: Settings, tmp_path: Path) -> Any:
    import asyncio

    asyncio.run(wipe(settings.db_url))
    with server_pair(tmp_path, settings.db_url, MASTER_TOKEN) as pair:
        yield pair


@pytest.mark.latency
def test_r14_5_a_tour_on_a_is_aborted_through_b_within_a_second(pair: Any) -> None:
    a, b = pair
    _abort_through(a, b)


def test_r14_5_a_client_op_of_a_tour_on_a_is_answered_through_b(pair: Any) -> None:
    a, b = pair
    _client_op_through(a, b)


@pytest.mark.latency
def test_r14_5_serve_with_two_workers_keeps_abort_and_client_ops(
    settings: Settings, tmp_path: Path
) -> None:
    import asyncio

    asyncio.run(wipe(settings.db_url))
    server = ServerProcess(tmp_path / "w", settings.db_url, MASTER_TOKEN,
                           args=("--workers", "2")).start(timeout=60)
    try:
        for _ in range(3):  # new connections each time: the two workers share them
            _abort_through(server, server)
            _client_op_through(server, server)
        with _fresh(server) as c:
            assert c.get("/v1/health").status_code == 200
    finally:
        server.kill()


def test_r14_5_a_plugin_set_up_through_a_acts_on_b_and_b_changes_it_over_that(
        pair: Any) -> None:
    a, b = pair
    scripts = {"scripts": [{"find": "friend", "replace": "PAL", "placement": ["ai_output"]}]}
    with _fresh(a) as ca:
        r = ca.patch("/v1/plugins/regex_scripts", json={"settings": scripts, "enabled": True})
        assert r.status_code == 200, r.text
    chat = _chat(b, [{"text": "Hello there friend"}] * 5)
    with _fresh(b) as cb:
        assert _swaps(cb.get("/v1/plugins/regex_scripts").json()) == [("friend", "PAL")]
        deadline = time.monotonic() + 5
        while True:  # B's tours take it within its sync interval
            answer = cb.post(f"/v1/chats/{chat}/generate",
                             json={"message": {"content": "hi"}, "stream": False}).json()
            if answer["content"] == "Hello there PAL" or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert answer["content"] == "Hello there PAL"
        # a change through B is made over what A stored, not over B's old copy
        r = cb.patch("/v1/plugins/regex_scripts", json={"enabled": False})
        assert r.status_code == 200 and _swaps(r.json()) == [("friend", "PAL")]
    with _fresh(a) as ca:
        shown = ca.get("/v1/plugins/regex_scripts").json()
        assert shown["enabled"] is False and _swaps(shown) == [("friend", "PAL")]


def _swaps(plugin: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["find"], s["replace"]) for s in plugin["settings"]["scripts"]]
