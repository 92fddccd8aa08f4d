"""R8: request bodies are capped before they are parsed or their sender authenticated.

Driven through the ASGI interface itself, so each test sees exactly how much of the body
the app asked for: a declared length past the limit is refused without one read, a
chunked body is refused as soon as it passes the limit, a request with a body and no
valid token is refused before its body is read, and an upload route takes the larger
upload limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from evacore.config import LimitSettings, Settings
from evacore.core import Core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN

LIMIT = 4096
UPLOAD = 64 * 1024


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"limits": LimitSettings(
        max_body_bytes=LIMIT, max_upload_bytes=UPLOAD)})


class Exchange:
    """One request through the app: the body in `chunks`, what the app read and answered."""

    def __init__(self, chunks: list[bytes], *, leaves: bool = False) -> None:
        self.chunks = list(chunks)
        self.leaves = leaves
        self.reads = 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.reads < len(self.chunks):
            chunk = self.chunks[self.reads]
            self.reads += 1
            return {"type": "http.request", "body": chunk,
                    "more_body": self.reads < len(self.chunks)}
        if not self.leaves:
            await asyncio.Event().wait()  # the client stays until the answer comes
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        assert len(starts) == 1, self.sent
        return int(starts[0]["status"])

    @property
    def body(self) -> Any:
        return orjson.loads(b"".join(m.get("body", b"") for m in self.sent
                                     if m["type"] == "http.response.body"))


async def _call(core: Core, method: str, path: str, chunks: list[bytes], *,
                token: str | None = MASTER_TOKEN, length: int | None = None,
                ctype: str = "application/json", leaves: bool = False) -> Exchange:
    headers = [(b"host", b"evacore.test"), (b"content-type", ctype.encode())]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    else:
        headers.append((b"transfer-encoding", b"chunked"))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("evacore.test", 80)}
    exchange = Exchange(chunks, leaves=leaves)
    await create_app(core=core)(scope, exchange.receive, exchange.send)
    return exchange


def _too_large(ex: Exchange, limit: int) -> None:
    assert ex.status == 413
    error = ex.body["error"]
    assert error["code"] == "too_large" and str(limit) in error["message"]
    assert error["details"]["limit"] == limit


async def test_r8_declared_length_past_the_limit_is_refused_unread(core: Core) -> None:
    ex = await _call(core, "POST", "/v1/chats", [b"{}"], length=LIMIT + 1)
    _too_large(ex, LIMIT)
    assert ex.reads == 0  # not one byte of the body was asked for


async def test_r8_declared_length_is_refused_before_authentication(core: Core) -> None:
    ex = await _call(core, "POST", "/v1/chats", [b"{}"], length=10**9, token=None)
    _too_large(ex, LIMIT)
    assert ex.reads == 0


async def test_r8_chunked_body_refused_as_soon_as_it_passes_the_limit(core: Core) -> None:
    chunks = [b" " * 1000] * 50  # 50 kB, never declared
    ex = await _call(core, "POST", "/v1/chats", chunks)
    _too_large(ex, LIMIT)
    assert ex.reads == LIMIT // 1000 + 1  # refused on the chunk that crossed the limit


async def test_r8_body_within_the_limit_goes_through(core: Core) -> None:
    body = orjson.dumps({"title": "x" * 100})
    ex = await _call(core, "POST", "/v1/chats", [body[:50], body[50:]])
    assert ex.status == 201, ex.body


@pytest.mark.parametrize("token", [None, "evc_not_a_token"])
async def test_r8_body_without_a_valid_token_is_not_read(core: Core, token: str | None) -> None:
    ex = await _call(core, "POST", "/v1/chats", [b"[" * 3000], token=token, length=3000)
    assert ex.status == 401 and ex.body["error"]["code"] == "unauthorized"
    assert ex.reads == 0
    ex = await _call(core, "POST", "/v1/chats", [b" " * 1000] * 3, token=token)
    assert ex.status == 401 and ex.reads == 0


BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def _chat_upload(padding: int) -> bytes:
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"c.jsonl\"\r\n\r\n").encode()
    chat = b'{"user_name":"U","character_name":"C"}\n{"name":"U","is_user":true,"mes":"hi"}'
    return head + chat + b" " * padding + f"\r\n--{BOUNDARY}--\r\n".encode()


async def _chats(core: Core) -> int:
    from sqlalchemy import func, select

    from evacore.store.tables import Chat

    async with core.session() as s:
        return int(await s.scalar(select(func.count()).select_from(Chat)) or 0)


async def test_r8_upload_routes_take_the_upload_limit(core: Core) -> None:
    body = _chat_upload(3 * LIMIT)
    ctype = MULTIPART
    ex = await _call(core, "POST", "/v1/chats/import", [body], length=len(body), ctype=ctype)
    assert ex.status == 201, ex.body  # 12 kB: past the JSON limit, within the upload one
    ex = await _call(core, "POST", "/v1/chats/import", [b"x"], length=UPLOAD + 300 * 1024,
                     ctype=ctype)
    assert ex.status == 413 and ex.reads == 0


async def test_r8_import_whose_client_left_stores_nothing(core: Core) -> None:
    """The client gave up while the chat was being imported: it is not committed."""
    body = _chat_upload(0)
    before = await _chats(core)
    ex = await _call(core, "POST", "/v1/chats/import", [body], length=len(body),
                     ctype=MULTIPART, leaves=True)
    assert ex.status == 400 and "nothing was stored" in ex.body["error"]["message"]
    assert await _chats(core) == before


async def test_r8_2_chat_upload_refused_by_its_line_count_while_it_arrives(core: Core) -> None:
    from evacore.formats.limits import Limits

    core.import_limits = Limits(max_chat_messages=100)
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"c.jsonl\"\r\n\r\n").encode()
    lines = [b'{"name":"U","is_user":true,"mes":"hi"}\n' * 50 for _ in range(20)]  # 1000
    chunks = [head, *lines, f"\r\n--{BOUNDARY}--\r\n".encode()]
    before = await _chats(core)
    ex = await _call(core, "POST", "/v1/chats/import", chunks, ctype=MULTIPART)
    assert ex.status == 413 and "more than 100 lines" in ex.body["error"]["message"]
    assert ex.reads < len(chunks) // 2  # refused long before the end of the upload
    assert await _chats(core) == before


async def test_r14_facade_refusals_speak_openai(core: Core) -> None:
    """The OpenAI facade's routes get the same cap, refused in OpenAI's error shape; they
    check the token before reading the body by themselves, in that shape too."""
    ex = await _call(core, "POST", "/v1/chat/completions", [b"{}"], length=LIMIT + 1)
    assert ex.status == 413 and ex.reads == 0
    assert set(ex.body["error"]) == {"message", "type", "param", "code"}
    assert ex.body["error"]["type"] == "invalid_request_error"
    ex = await _call(core, "POST", "/v1/chat/completions", [b" " * 1000] * 10)
    assert ex.status == 413 and set(ex.body["error"]) == {"message", "type", "param", "code"}
    ex = await _call(core, "POST", "/v1/chat/completions", [b"{}"], length=2, token=None)
    assert ex.status == 401 and ex.body["error"]["code"] == "missing_api_key"


async def test_r14_1_a_chunked_facade_body_past_the_limit_is_refused_quietly(
        core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from evacore.channels.openai import routes

    crashes: list[str] = []
    monkeypatch.setattr(routes.log, "exception",
                        lambda event, **kw: crashes.append(event))
    chunks = [b" " * 1000] * 50
    ex = await _call(core, "POST", "/v1/chat/completions", chunks, leaves=True)
    assert ex.status == 413
    assert ex.body["error"]["code"] == "too_large"
    assert ex.body["error"]["type"] == "invalid_request_error"  # OpenAI's envelope
    assert crashes == []  # a body cut at the limit is no crash of the server
