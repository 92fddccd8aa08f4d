"""The hot routes: `POST /v1/chats/{id}/generate` and `POST /v1/chat/completions`, the
requests every message makes, answered straight from the app's ASGI call when they are
ordinary ones, without the framework's middleware, routing and parameter layers (about a
sixth of a tour's fixed CPU), and with their stream written to the server's own `send`
(every token passed through five wrappers otherwise).

Ordinary means a body of a declared length within the body limit; for generate also a JSON
body, a bearer token that names a user, and a body that validates as the route's model.
The answer is then the route's own (`routes/generate.answer`, the facade's
`chat_completions`), errors rendered as the app renders them on that route.

Must not: answer anything the full app would answer otherwise. A request it is not sure of
(another content type, no length, a body past the limit, a missing or unknown token, a body
that does not parse or validate, a root path, overridden dependencies) goes to the full app
with what was read of it handed on as it came, so every refusal keeps its one shape and its
order (the size cap first, the token before the body).
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from evacore.channels.openai.routes import chat_completions, in_openai_terms
from evacore.server.auth import bearer_token
from evacore.server.errors import response_for
from evacore.server.routes.generate import GenerateIn, answer
from evacore.store.users import identify

GENERATE = re.compile(r"/v1/chats/([^/]+)/generate")
FACADE = "/v1/chat/completions"


class HotRoute:
    """Called first with every HTTP request; `max_body`: the body limit of the route (the
    app's `limits.max_body_bytes`)."""

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body

    async def __call__(self, app: Any, scope: Scope, receive: Receive, send: Send
                       ) -> Receive | None:
        """None when the request was answered here; else the receive the full app reads
        the request from (what was read of it first)."""
        if (scope["method"] != "POST" or scope.get("root_path") or app.dependency_overrides
                or getattr(app.state, "core", None) is None):
            return receive
        path = scope["path"]
        if path == FACADE:
            length, _ = _headers(scope)
            if length is None or length > self.max_body:
                return receive
            scope["app"] = app
            response = await in_openai_terms(chat_completions(Request(scope, receive)))
            await response(scope, receive, send)
            return None
        matched = GENERATE.fullmatch(path)
        if matched is None:
            return receive
        return await self._generate(app, matched.group(1), scope, receive, send)

    async def _generate(self, app: Any, chat_id: str, scope: Scope, receive: Receive,
                        send: Send) -> Receive | None:
        core = app.state.core
        length, json_body = _headers(scope)
        token = bearer_token(scope)
        if length is None or length > self.max_body or not json_body or token is None:
            return receive
        try:
            who = await identify(core.session, core.token_cache, token)
        except Exception:  # noqa: BLE001 - the full app meets it again and answers for it
            return receive
        if who is None:
            return receive
        messages, body = await _read_body(receive, length)
        if body is None:
            return _replay(messages, receive)
        try:  # read as the framework reads it (orjson would take a 70-bit integer as a float)
            data = json.loads(body)
            parsed = GenerateIn.model_validate(data) if isinstance(data, dict) else None
        except (ValueError, RecursionError, ValidationError):
            parsed = None
        if parsed is None:
            return _replay(messages, receive)
        scope["app"] = app
        # this frame lives as long as the answer streams: the request as read (its bytes,
        # its JSON, then its model) is let go of before
        del messages, body, data
        try:
            response = await answer(core, chat_id, parsed, who, receive)
        except Exception as exc:  # noqa: BLE001 - rendered as the app's handlers do
            response = response_for(exc)
        del parsed
        await response(scope, receive, send)
        return None


def _headers(scope: Scope) -> tuple[int | None, bool]:
    """The declared body length of a request that is not chunked (else None), and whether
    its body is JSON."""
    length: int | None = None
    json_body = chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = int(value) if value.isdigit() else None
        elif name == b"content-type":
            json_body = value.partition(b";")[0].strip().lower() == b"application/json"
        elif name == b"transfer-encoding":
            chunked = True
    return (None if chunked or not length else length), json_body


async def _read_body(receive: Receive, length: int) -> tuple[list[Message], bytes | None]:
    """The messages read and the whole body; None for the body when the client went away
    first or sent more than it declared."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > length:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that gives the messages already read, in order, then the client's next."""
    pending = deque(messages)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
