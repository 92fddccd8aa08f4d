"""FakeUpstream: one loopback server that speaks every wire format the adapters use
(OpenAI chat and text, Anthropic, KoboldCpp, llama.cpp /tokenize), answers from a Script,
records every request, and notices when a client leaves mid-answer.

Must not: bind anything but loopback, or reach the network.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from evacore.providers.base import Connection, Timeouts
from tests.fakes import anthropic_wire, kobold_wire, openai_wire
from tests.fakes._frames import Frame
from tests.fakes.script import Reply, Script
from tests.fakes.server import Exchange, LoopbackServer, RecordedRequest, Served

FAKE_API_KEY = "sk-fake-secret-key-0123456789"
BASE_PATHS = {"openai-chat": "/v1", "openai-text": "/v1", "anthropic": "", "kobold": ""}
_PLAIN_HEADERS = frozenset({"host", "content-type", "content-length", "accept",
                            "accept-encoding", "connection", "user-agent", "anthropic-version"})


def echo_of(request: RecordedRequest) -> str:
    """What an echoing upstream repeats: header values other than the plain ones (the
    credentials first), then the query string."""
    headers = sorted(((k.lower(), v) for k, v in request.headers.items()
                      if k.lower() not in _PLAIN_HEADERS),
                     key=lambda kv: kv[0] not in ("authorization", "x-api-key"))
    parts = [v for _, v in headers] + ([request.query] if request.query else [])
    return " ".join(parts)


def _echo_frame(route: _Route, echo: str) -> str:
    """A broken JSON event whose text carries `echo` (in the route's event framing)."""
    event = route.malformed.split("\n", 1)[0] + "\n" if route.malformed.startswith("event:") else ""
    return event + 'data: {"echo": "' + echo.replace('"', "'") + '"\n\n'


@dataclass(frozen=True)
class _Route:
    frames: Callable[[Reply, Any], list[Frame]]
    whole: Callable[[Reply, Any], dict[str, Any]]
    error_body: Callable[[int, str], dict[str, Any]]
    error_frame: Callable[[str], str] | None
    malformed: str
    always_stream: bool = False


_OPENAI_CHAT = _Route(openai_wire.chat_frames, openai_wire.chat_whole, openai_wire.error_body,
                      openai_wire.error_frame, openai_wire.MALFORMED)
_OPENAI_TEXT = _Route(openai_wire.text_frames, openai_wire.text_whole, openai_wire.error_body,
                      openai_wire.error_frame, openai_wire.MALFORMED)
_ANTHROPIC = _Route(anthropic_wire.frames, anthropic_wire.whole, anthropic_wire.error_body,
                    anthropic_wire.error_frame, anthropic_wire.MALFORMED)
_KOBOLD = _Route(kobold_wire.frames, kobold_wire.whole, kobold_wire.error_body, None,
                 kobold_wire.MALFORMED)
_KOBOLD_STREAM = _Route(kobold_wire.frames, kobold_wire.whole, kobold_wire.error_body, None,
                        kobold_wire.MALFORMED, always_stream=True)

GENERATION_ROUTES = {
    "/v1/chat/completions": _OPENAI_CHAT,
    "/v1/completions": _OPENAI_TEXT,
    "/v1/messages": _ANTHROPIC,
    "/api/v1/generate": _KOBOLD,
    "/api/extra/generate/stream": _KOBOLD_STREAM,
}
SIDE_ROUTES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "/v1/messages/count_tokens": anthropic_wire.count_tokens,
    "/api/extra/tokencount": kobold_wire.tokencount,
    "/tokenize": kobold_wire.llamacpp_tokenize,
}


class FakeUpstream(Served):
    """`kind` only picks `base_url` and what `connection()` builds; every route is served."""

    def __init__(self, kind: str = "openai-chat", script: Script | None = None) -> None:
        if kind not in BASE_PATHS:
            raise ValueError(f"no fake for kind {kind!r}")
        self.kind = kind
        self.script = script or Script()
        self.server = LoopbackServer(self._handle)
        self.aborted_genkeys: list[str] = []
        self._lock = threading.Lock()

    # what tests look at
    @property
    def base_url(self) -> str:
        return self.server.url + BASE_PATHS[self.kind]

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    @property
    def generation_requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.path in GENERATION_ROUTES]

    def bodies(self, path: str | None = None) -> list[Any]:
        reqs = self.generation_requests if path is None else [
            r for r in self.server.requests if r.path == path]
        return [r.json for r in reqs]

    @property
    def last_body(self) -> Any:
        return self.generation_requests[-1].json

    @property
    def open_connections(self) -> int:
        return self.server.open_connections

    @property
    def client_left(self) -> threading.Event:
        return self.server.client_left

    @property
    def disconnect_times(self) -> list[float]:
        return self.server.disconnect_times

    async def await_client_left(self, timeout: float) -> bool:
        return await self.server.await_client_left(timeout)

    def wait_client_left(self, timeout: float) -> bool:
        return self.server.wait_client_left(timeout)

    def connection(self, **overrides: Any) -> Connection:
        """A Connection aimed at this fake: fast retries, short timeouts, a fake key."""
        fields: dict[str, Any] = {
            "id": f"fake-{self.kind}", "name": f"fake {self.kind}", "kind": self.kind,
            "base_url": self.base_url, "api_key": FAKE_API_KEY, "model": "fake-model",
            "timeouts": Timeouts(connect=2, first_token=5, idle=5, total=20),
            "retries": 2, "retry_backoff": 0.01, "retry_after_cap": 2.0,
        }
        fields.update(overrides)
        return Connection(**fields)

    # serving
    async def _handle(self, ex: Exchange) -> None:
        path, body = ex.request.path, ex.request.json or {}
        if ex.request.method != "POST":
            ex.send_json(405, {"error": {"message": "POST only"}})
            return
        if path == "/api/extra/abort":
            with self._lock:
                self.aborted_genkeys.append(str(body.get("genkey", "")))
            ex.send_json(200, {"success": "true", "done": "true"})
            return
        if path in SIDE_ROUTES:
            ex.send_json(200, SIDE_ROUTES[path](body))
            return
        route = GENERATION_ROUTES.get(path)
        if route is None:
            ex.send_json(404, {"error": {"message": f"no route {path}"}})
            return
        reply = self.script.next()
        echo = echo_of(ex.request) if reply.echo else ""
        if reply.hang_before_headers:
            await ex.sleep(float("inf"))
        if reply.status >= 400:
            error = route.error_body(reply.status, f"{reply.error_message} {echo}".strip())
            ex.send_json(reply.status, error, headers=reply.headers)
            return
        if not (route.always_stream or body.get("stream") is True):
            await ex.sleep(reply.first_token_delay)
            if reply.malformed_after is not None:
                ex.send(200, ('{"echo": "' + echo.replace('"', "'") + '"').encode(),
                        headers=reply.headers)
                return
            ex.send_json(200, route.whole(reply, body), headers=reply.headers)
            return
        await self._play(ex, route, reply, body, echo)

    @property
    def bytes_written(self) -> int:
        """Bytes the fake has written to its sockets (see `Reply.flood_bytes`)."""
        return self.server.bytes_written

    async def _flood(self, ex: Exchange, route: _Route, reply: Reply, body: Any) -> None:
        piece = ("x" * (reply.flood_piece - 1)) + " "
        frames = route.frames(replace(reply, chunks=[piece], reasoning="", tool_calls=[]), body)
        first = next(i for i, f in enumerate(frames) if f.delta)
        ex.start_stream(headers=reply.headers)
        for frame in frames[:first]:
            ex.write(frame.data)
        delta = frames[first].data.encode()
        for _ in range(max(1, reply.flood_bytes // len(piece))):
            ex.write(delta)
            await ex.drain()
            if reply.token_delay:
                await ex.sleep(reply.token_delay)  # a paced flood: every piece on its own
        for frame in frames[first + 1:]:
            ex.write(frame.data)
        ex.end_stream()

    async def _play(self, ex: Exchange, route: _Route, reply: Reply, body: Any,
                    echo: str = "") -> None:
        if reply.flood_bytes:
            await self._flood(ex, route, reply, body)
            return
        ex.start_stream(headers=reply.headers)
        genkey = body.get("genkey")
        sent = 0
        for frame in route.frames(reply, body):
            if frame.delta:
                if genkey and genkey in self.aborted_genkeys:
                    continue
                if reply.hang_after == sent:
                    await ex.sleep(float("inf"))
                if reply.reset_after == sent:
                    ex.reset()
                    return
                if reply.malformed_after == sent:
                    ex.write(_echo_frame(route, echo) if echo else route.malformed)
                    ex.end_stream()
                    return
                if reply.error_event_after == sent and route.error_frame is not None:
                    message = f"{reply.error_message or 'Overloaded'} {echo}".strip()
                    ex.write(route.error_frame(message))
                    ex.end_stream()
                    return
                await ex.sleep(reply.first_token_delay if sent == 0 else reply.token_delay)
                sent += 1
            ex.write(frame.data)
        ex.end_stream()
