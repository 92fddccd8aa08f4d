"""The relay benchmark's side of evacore's API and its load: the connections and chats it
sets up and warms, what it reads back from their tours, the raw requests the load client
sends and the plans it runs.

Must not: start or stop a process, or measure anything (`bench_relay.py` and
`_relay_memory.py` do).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

TOKEN = "bench-master-token-0123456789abcdef"
PROMPT = "Hello there, how are you today?"
WARM_TOURS = 5
"""Streamed tours before measuring: first uses (imports, caches, pools) are not steady state."""
STAGES_BEFORE_STREAMING = ("user_input", "macros", "character", "lorebook", "memory",
                           "token_count", "context_shift", "interceptors", "instruct",
                           "serialize", "request")
"""The stages a tour runs before its streaming stage (their names in its timings)."""


def raw_request(path: str, port: int, body: dict[str, Any], token: str | None = None,
                headers: dict[str, str] | None = None) -> str:
    raw = json.dumps(body, separators=(",", ":"))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    auth += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(raw.encode())}\r\n\r\n{raw}")


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


class Setup:
    """Creates connections and chats over the evacore HTTP API."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url + "/v1", timeout=60,
                                 headers={"Authorization": f"Bearer {TOKEN}"})

    def connection(self, base_url: str, tokens: int, delay_ms: float) -> str:
        r = self.http.post("/connections", json={
            "name": model_name(tokens, delay_ms), "kind": "openai-chat", "base_url": base_url,
            "model": "bench-model", "max_tokens": tokens * 2, "context_size": 65536})
        r.raise_for_status()
        return str(r.json()["id"])

    def chats(self, connection_id: str, n: int) -> list[str]:
        ids = []
        for i in range(n):
            r = self.http.post("/chats", json={"connection_id": connection_id,
                                               "title": f"bench {i}"})
            r.raise_for_status()
            ids.append(str(r.json()["id"]))
        return ids

    def warm(self, chat_id: str, tours: int = WARM_TOURS) -> None:
        for _ in range(tours):
            r = self.http.post(f"/chats/{chat_id}/generate",
                               json={"message": {"content": PROMPT}, "stream": True})
            r.raise_for_status()

    def tour_records(self, chat_ids: list[str], limit: int = 12) -> dict[str, Any]:
        """From the diagnostics of the chats' newest answers' tours: the deltas that went out
        from the upstream read (`fast_lane_deltas`) and the tokens answered; per tour, the
        time from its start to its first delta (`first_token_ms`), its wait before stage 1
        (`waited_ms`) and its stages' own time before the streaming stage (stages 1-11)."""
        fast = tokens = turn_waits = 0
        first: list[float] = []
        stages: list[float] = []
        waited: list[float] = []
        for chat in chat_ids:
            r = self.http.get(f"/chats/{chat}/messages")
            r.raise_for_status()
            answers = [m for m in r.json()["messages"] if m["role"] == "assistant"]
            for message in answers[-limit:]:
                variant = next(v for v in message["variants"]
                               if v["id"] == message["active_variant"])
                if not variant.get("tour_id"):
                    continue
                diagnostics = self.http.get(f"/tours/{variant['tour_id']}").json()["diagnostics"]
                fast += int(diagnostics.get("fast_lane_deltas", 0))
                tokens += int((variant.get("usage") or {}).get("completion_tokens", 0))
                if isinstance(diagnostics.get("first_token_ms"), int | float):
                    first.append(float(diagnostics["first_token_ms"]))
                    timings = diagnostics.get("timings") or {}
                    stages.append(sum(float(timings.get(name, 0.0))
                                      for name in STAGES_BEFORE_STREAMING))
                    waited.append(float(diagnostics.get("waited_ms") or 0.0))
                    turn_waits += "turn_wait_ms" in diagnostics
        return {"fast": fast, "tokens": tokens, "first_token_ms": first, "stages_ms": stages,
                "waited_ms": waited, "turn_waits": turn_waits}

    def warm_facade(self, chat_id: str, model: str, tours: int = WARM_TOURS) -> None:
        for i in range(tours):
            r = self.http.post("/chat/completions", json=facade_body(model, i),
                               headers={"X-Evacore-Chat": chat_id})
            r.raise_for_status()


def model_name(tokens: int, delay_ms: float) -> str:
    return f"bench-{tokens}-{delay_ms:g}"


def facade_body(model: str, turn: int) -> dict[str, Any]:
    """One of two alternating messages: each request is a new turn of the stream's chat (the
    same message twice in a row would be a regenerate)."""
    return {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"{PROMPT} ({'ab'[turn % 2]})"}]}


def plan(port: int, requests: list[str], marker: str, scenario: Any,
         error_marker: str | None) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "requests": requests, "marker": marker,
            "error_marker": error_marker, "concurrency": scenario.concurrency,
            "count": scenario.count, "seconds": scenario.seconds,
            "grace": max(5.0, (scenario.seconds or 0) / 2)}


def generate_plan(port: int, chats: list[str], scenario: Any) -> dict[str, Any]:
    """The scenario through generate: one stream per chat, each message a new turn."""
    requests = [raw_request(f"/v1/chats/{chat}/generate", port,
                            {"message": {"content": PROMPT}, "stream": True}, TOKEN)
                for chat in chats]
    return plan(port, requests, "event: delta", scenario, "event: error")


def facade_plan(port: int, chats: list[str], model: str, scenario: Any) -> dict[str, Any]:
    """The scenario through the facade: one stream per chat (named by `X-Evacore-Chat`),
    alternating two messages (`facade_body`)."""
    turns = [raw_request("/v1/chat/completions", port, facade_body(model, turn), TOKEN,
                         {"X-Evacore-Chat": chat}) for chat in chats for turn in (0, 1)]
    return {**plan(port, turns, '"delta":{"content"', scenario, 'data: {"error"'),
            "per_stream": 2}
