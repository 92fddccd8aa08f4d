"""An httpx client of evacore's HTTP API for the terminal: chats, tours, client-op answers, and
the SSE stream of `POST /v1/chats/{id}/generate` read event by event (R8.4, R12.4).

Must not: print anything or decide what a command does; it turns HTTP into values and
`ApiError`s (the server's `{"error": {"code", "message"}}` body, or a connection failure).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource

STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)
"""A tour may go quiet for long (a client op waiting for the person): no read timeout."""


class ApiError(Exception):
    """A refused request (`status` and the server's `code`) or an unreachable server (status 0)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def __str__(self) -> str:
        return f"{self.message} ({self.code}, HTTP {self.status})" if self.status else self.message


@dataclass(frozen=True)
class Event:
    """One SSE event of a tour: `tour`, `delta`, `hold`, `tool_call`, `tool_result`,
    `client_op`, `message`, `error` or `done`."""

    name: str
    data: dict[str, Any]


def _error_of(response: httpx.Response, body: bytes) -> ApiError:
    try:
        error = orjson.loads(body)["error"]
        return ApiError(response.status_code, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace").strip()[:300] or response.reason_phrase
        return ApiError(response.status_code, "http_error", text)


class Api:
    """The calls the terminal makes; `http` carries the base URL and the bearer token."""

    def __init__(self, http: httpx.AsyncClient, *, where: str, socket: str | None = None) -> None:
        self.http = http
        self.where = where
        """What the person is talking to, for messages: a URL or the local data dir."""
        self.socket = socket
        """The Unix socket of an in-process server (embedded mode), else None."""

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.where}: {exc}") from exc
        if response.status_code >= 400:
            raise _error_of(response, response.content)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def health(self) -> dict[str, Any]:
        return dict(await self.call("GET", "/v1/health"))

    async def connections(self) -> list[dict[str, Any]]:
        return list((await self.call("GET", "/v1/connections"))["connections"])

    async def characters(self) -> list[dict[str, Any]]:
        """Every character (summaries), page by page."""
        found: list[dict[str, Any]] = []
        while True:
            page = await self.call("GET", "/v1/characters",
                                   params={"limit": 1000, "offset": len(found)})
            found.extend(page["characters"])
            if not page["characters"] or len(found) >= int(page.get("total", 0)):
                return found

    async def character(self, character_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/characters/{character_id}"))

    async def create_chat(self, **fields: Any) -> dict[str, Any]:
        body = {k: v for k, v in fields.items() if v is not None}
        return dict(await self.call("POST", "/v1/chats", json=body))

    async def chat(self, chat_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/chats/{chat_id}"))

    async def patch_chat(self, chat_id: str, **fields: Any) -> dict[str, Any]:
        return dict(await self.call("PATCH", f"/v1/chats/{chat_id}", json=fields))

    async def messages(self, chat_id: str) -> list[dict[str, Any]]:
        return list((await self.call("GET", f"/v1/chats/{chat_id}/messages"))["messages"])

    async def tour(self, tour_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/tours/{tour_id}"))

    async def answer_op(self, tour_id: str, call_id: str, content: str, error: bool) -> bool:
        """Post a client op's result; False when the tour no longer waits for it (409)."""
        try:
            await self.call("POST", f"/v1/tours/{tour_id}/client-ops/{call_id}",
                            json={"content": content, "error": error})
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def generate(self, chat_id: str, body: dict[str, Any]) -> AsyncIterator[Event]:
        """The tour's events as they arrive. Closing the iterator early closes the stream,
        which aborts the tour on the server."""
        request = self.http.build_request(
            "POST", f"/v1/chats/{chat_id}/generate", json={**body, "stream": True},
            headers={"Accept": "text/event-stream"}, timeout=STREAM_TIMEOUT)
        try:
            response = await self.http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.where}: {exc}") from exc
        try:
            if response.status_code >= 400:
                raise _error_of(response, await response.aread())
            try:
                async for sse in EventSource(response).aiter_sse():
                    if sse.event and sse.data:
                        yield Event(sse.event, orjson.loads(sse.data))
            except httpx.HTTPError as exc:
                raise ApiError(0, "stream_broken",
                               f"the stream from {self.where} broke off: {exc}") from exc
        finally:
            await response.aclose()


def remote_api(url: str, token: str) -> Api:
    """An Api for a running evacore server at `url` (close its `http` when done)."""
    base = url.rstrip("/")
    http = httpx.AsyncClient(base_url=base, timeout=30.0,
                             headers={"Authorization": f"Bearer {token}"})
    return Api(http, where=base)
