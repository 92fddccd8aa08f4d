"""Request body caps, applied before anything reads a body: a pure ASGI middleware that
answers 413 at once when `Content-Length` is past the route's limit, and counts a streamed
(chunked) body as it arrives, answering 413 the moment the limit is passed.

Must not: buffer a body (it passes each chunk on as it comes), parse one, or know who is
asking: it runs before authentication, so an anonymous client cannot make the server hold
more than the limit. The rest of a refused body is read and thrown away by the server.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from evacore.server.errors import error_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


Render = Callable[[str, int], ASGIApp]
"""(message, limit) → the 413 answer, in the error shape the route's protocol speaks."""


def evacore_refusal(message: str, limit: int) -> ASGIApp:
    """The 413 in evacore's `{"error": {"code", "message", "details"}}` shape."""
    return error_response(413, "too_large", message, details={"limit": limit})


@dataclass(frozen=True)
class RouteLimit:
    """Bodies of requests whose method and path match get `limit` bytes instead, refused
    with `render` when given (a route of another protocol, e.g. the OpenAI facade)."""

    methods: frozenset[str]
    path: re.Pattern[str]
    limit: int
    render: Render | None = None


class BodyLimit:
    """`default` bytes for every body; `routes` name the larger (or smaller) exceptions."""

    def __init__(self, app: ASGIApp, *, default: int, routes: Iterable[RouteLimit] = ()) -> None:
        self.app = app
        self.default = default
        self.routes = tuple(routes)

    def limit_for(self, method: str, path: str) -> tuple[int, Render]:
        for route in self.routes:
            if method in route.methods and route.path.match(path):
                return route.limit, route.render or evacore_refusal
        return self.default, evacore_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, render = self.limit_for(scope.get("method", "GET"), scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(scope, receive, send, limit, render)
            return
        await self.app(*_counting(scope, receive, send, limit, render))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int,
                  render: Render) -> None:
    answer = render(f"the request body is larger than {limit} bytes", limit)
    await answer(scope, receive, send)


def _counting(scope: Scope, receive: Receive, send: Send, limit: int, render: Render
              ) -> tuple[Scope, Receive, Send]:
    """A receive that counts body bytes and, past `limit`, answers 413 itself (unless the
    app has begun its answer) and tells the app the client is gone; a send that drops what
    the app answers after our 413."""
    seen = 0
    started = False
    refused = False
    answered = False

    async def counted_receive() -> Message:
        nonlocal seen, refused, answered
        if refused:
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                refused = True
                if not started:
                    answered = True
                    await _refuse(scope, receive, send, limit, render)
                return {"type": "http.disconnect"}
        return message

    async def guarded_send(message: Message) -> None:
        nonlocal started
        if answered:
            return
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    return scope, counted_receive, guarded_send
