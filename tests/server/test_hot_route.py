"""The hot route (server/hot_route.py): an ordinary generate request is answered before the
framework's layers, and every request it is not sure of reaches them whole, answered as it
always was.

Driven through the ASGI interface, with a pure ASGI middleware in the app that records what
reaches the framework's layers, so each test sees which of the two answered and how much of
the body was read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evacore.core import Core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN
from tests.server.test_body_limits import Exchange


class Recorder:
    """Records each request that reaches the framework's middleware and the body the layers
    below it read."""

    def __init__(self, app: Any, seen: list[dict[str, Any]]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        entry: dict[str, Any] = {"path": scope["path"], "body": b""}
        self.seen.append(entry)

        async def recorded() -> Any:
            message = await receive()
            entry["body"] += message.get("body", b"")
            return message

        await self.app(scope, recorded, send)


class Leaving(Exchange):
    """A client that sends its chunks, promises more, and goes away."""

    async def receive(self) -> dict[str, Any]:
        if self.reads < len(self.chunks):
            self.reads += 1
            return {"type": "http.request", "body": self.chunks[self.reads - 1],
                    "more_body": True}
        return {"type": "http.disconnect"}


class Hot:
    def __init__(self, core: Core) -> None:
        self.seen: list[dict[str, Any]] = []
        self.app = create_app(core=core)
        self.app.add_middleware(Recorder, seen=self.seen)

    async def call(self, path: str, chunks: list[bytes], *, token: str | None = MASTER_TOKEN,
                   chunked: bool = False, ctype: str = "application/json",
                   length: int | None = None, leaves: bool = False) -> Exchange:
        headers = [(b"host", b"evacore.test"), (b"content-type", ctype.encode())]
        if token is not None:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        if chunked:
            headers.append((b"transfer-encoding", b"chunked"))
        else:
            declared = sum(map(len, chunks)) if length is None else length
            headers.append((b"content-length", str(declared).encode()))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "root_path": "", "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": ("evacore.test", 80)}
        exchange = (Leaving if leaves else Exchange)(chunks, leaves=leaves)
        await self.app(scope, exchange.receive, exchange.send)
        return exchange


def _body(**fields: Any) -> bytes:
    return json.dumps({"message": {"content": "hi"}, **fields}).encode()


def _events(ex: Exchange) -> list[str]:
    text = b"".join(m.get("body", b"") for m in ex.sent if m["type"] == "http.response.body")
    return [line[7:] for line in text.decode().splitlines() if line.startswith("event: ")]


@pytest.fixture
async def chat_path(client: Any) -> str:
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    return f"/v1/chats/{chat}/generate"


async def test_an_ordinary_generate_is_answered_before_the_framework(
    core: Core, chat_path: str
) -> None:
    hot = Hot(core)
    ex = await hot.call(chat_path, [_body()])
    assert ex.status == 200
    assert _events(ex)[-2:] == ["message", "done"] and "delta" in _events(ex)
    body = _body(stream=False)
    ex = await hot.call(chat_path, [body[:9], body[9:]])  # a body in two reads
    assert ex.status == 200 and ex.body["status"] == "completed"
    assert ex.body["content"]
    assert hot.seen == []


@pytest.mark.parametrize(("case", "status", "where"), [
    ("bad_mode", 422, "mode"),
    ("wide_integer", 422, "anything[0]"),  # a JSON reader taking it as a float would pass
    ("not_json", 422, ""),
    ("not_an_object", 422, ""),
    ("unknown_token", 401, ""),
    ("chunked", 200, ""),
    ("form", 422, ""),
])
async def test_a_request_it_is_not_sure_of_reaches_the_framework_whole(
    core: Core, chat_path: str, case: str, status: int, where: str
) -> None:
    hot = Hot(core)
    body, options = {
        "bad_mode": (_body(mode="sideways", stream=False), {}),
        "wide_integer": (_body(params={"anything": [2**70]}, stream=False), {}),
        "not_json": (b"{not json", {}),
        "not_an_object": (b"[1, 2]", {}),
        "unknown_token": (_body(), {"token": "evc_not_a_token"}),
        "chunked": (_body(stream=False), {"chunked": True}),
        "form": (b"message=hi", {"ctype": "application/x-www-form-urlencoded"}),
    }[case]
    ex = await hot.call(chat_path, [body], **options)
    assert ex.status == status, ex.sent
    assert [entry["path"] for entry in hot.seen] == [chat_path]
    if status == 200:
        assert ex.body["status"] == "completed"
    else:
        assert ex.body["error"]["code"] in ("invalid_input", "unauthorized")
        assert where in ex.body["error"]["message"]
    if case == "unknown_token":
        assert ex.reads == 0 and hot.seen[0]["body"] == b""  # refused before the body
    else:
        assert hot.seen[0]["body"] == body  # read once, handed on whole


async def test_a_refusal_of_the_door_is_rendered_as_the_framework_would(
    core: Core, chat_path: str, client: Any
) -> None:
    hot = Hot(core)
    op = {"name": "ping", "description": "pong"}
    body = _body(stream=False, client_ops=[op])
    ex = await hot.call(chat_path, [body])
    assert hot.seen == []
    framework = await client.post(chat_path, content=body, headers={
        "content-type": "application/json", "transfer-encoding": "chunked"})
    assert ex.status == framework.status_code == 422
    assert ex.body == framework.json()
    assert "stream" in ex.body["error"]["message"]
    ex = await hot.call("/v1/chats/no-such-chat/generate", [_body(stream=False)])
    assert ex.status == 404 and ex.body["error"]["code"] == "not_found"


async def test_a_client_that_leaves_while_sending_stores_nothing(
    core: Core, chat_path: str, client: Any
) -> None:
    hot = Hot(core)
    body = _body()
    ex = await hot.call(chat_path, [body[:5]], length=len(body), leaves=True)
    assert [entry["path"] for entry in hot.seen] == [chat_path]
    assert not any(m["type"] == "http.response.body" and b"delta" in m.get("body", b"")
                   for m in ex.sent)
    messages = await client.get(chat_path.replace("/generate", "/messages"))
    assert messages.json()["messages"] == []


async def test_overridden_dependencies_take_the_framework_route(
    core: Core, chat_path: str
) -> None:
    from evacore.server.deps import get_core

    hot = Hot(core)
    hot.app.dependency_overrides[get_core] = lambda: core
    ex = await hot.call(chat_path, [_body(stream=False)])
    assert ex.status == 200 and [entry["path"] for entry in hot.seen] == [chat_path]


async def test_the_facade_is_answered_before_the_framework_in_its_own_terms(
    core: Core, client: Any
) -> None:
    hot = Hot(core)
    body = json.dumps({"model": "@mock", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    ex = await hot.call("/v1/chat/completions", [body])
    assert ex.status == 200
    text = b"".join(m.get("body", b"") for m in ex.sent if m["type"] == "http.response.body")
    assert b'"delta":{"content"' in text and text.endswith(b"data: [DONE]\n\n")
    for token, code in ((None, "missing_api_key"), ("evc_not_a_token", "invalid_api_key")):
        ex = await hot.call("/v1/chat/completions", [body], token=token)
        assert ex.status == 401 and ex.body["error"]["code"] == code
        assert set(ex.body["error"]) == {"message", "type", "param", "code"}
    bad = b'{"model": "@mock", "messages": 5}'
    ex = await hot.call("/v1/chat/completions", [bad])
    framework = await client.post("/v1/chat/completions", content=bad, headers={
        "content-type": "application/json", "transfer-encoding": "chunked"})
    assert ex.status == framework.status_code == 400
    assert ex.body == framework.json()
    assert [entry["path"] for entry in hot.seen] == []
