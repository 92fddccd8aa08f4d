"""Hostile sizes cost a real `evacore serve` little: a 60 MB body, a 16383² WebP icon in a
card, a 200k-entry lorebook, a 300k-line chat and a 40 MB chat message are each refused
with a 4xx in under 5 s, raising the server's peak RSS by less than 150 MiB.

The figures are the server process's own: its `VmHWM` is reset before each case and read
after it from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from evacore.formats._card_model import CardAsset
from evacore.formats.cards import Card
from evacore.importing.characters import store_card
from evacore.store.db import create_engine
from tests.formats._build import charx_with_icon, solid_webp
from tests.helpers import PeakGrowth, ServerProcess, memory_mib

TOKEN = "evc_caps_master_token_0123456789abcdef"
MAX_PEAK_MIB = 150
MAX_SECONDS = 5.0
MB = 1_000_000


BASELINE: dict[int, float] = {}
"""RSS of each fresh server (MiB), after one authenticated request warmed it up."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("caps")
    srv = ServerProcess(data / "data", f"sqlite+aiosqlite:///{data / 'caps.db'}", TOKEN).start()
    try:
        httpx.get(srv.url + "/v1/me", headers=srv.headers(), timeout=10)
        assert srv.proc is not None
        BASELINE[srv.proc.pid] = memory_mib(srv.proc.pid)["VmRSS"]
        yield srv
    finally:
        srv.kill()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def _pid(server: ServerProcess) -> int:
    assert server.proc is not None
    return server.proc.pid


def _cheap(m: PeakGrowth, what: str) -> None:
    above = m.peak - BASELINE[m.pid]
    print(f"{what}: peak +{m.mib:.1f} MiB over the RSS before, +{above:.1f} MiB over the "
          f"fresh server's, {m.seconds:.2f} s")
    assert m.mib < MAX_PEAK_MIB, f"{what} raised the server's peak RSS by {m.mib:.0f} MiB"
    assert above < MAX_PEAK_MIB, f"{what}: peak RSS {above:.0f} MiB above the fresh server's"
    assert m.seconds < MAX_SECONDS, f"{what} took {m.seconds:.1f} s"


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text[:500]
    body = r.json()["error"]
    assert body["code"] == code and body["message"], body
    return body


def _chunks(total: int, piece: bytes = b" " * 65536) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        part = piece[: total - sent]
        sent += len(part)
        yield part


def _master(server: ServerProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


# -- a 60 MB body ---------------------------------------------------------------------------

class RawPost:
    """A POST over a plain socket: the body is sent from a thread while the answer is read,
    so `seconds` is how long the server took to answer, not how long 60 MB took to send."""

    def __init__(self, server: ServerProcess, path: str, headers: dict[str, str],
                 body: Iterator[bytes], length: int | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}",
                *(f"{k}: {v}" for k, v in headers.items())]
        head.append(f"Content-Length: {length}" if length is not None
                    else "Transfer-Encoding: chunked")
        self.chunked = length is None
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        self.sender = threading.Thread(target=self._send, args=(body,), daemon=True)
        self.status = 0
        self.json: Any = None
        self.seconds = 0.0

    def _send(self, body: Iterator[bytes]) -> None:
        with contextlib.suppress(OSError):
            for part in body:
                self.sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if self.chunked
                                  else part)
            if self.chunked:
                self.sock.sendall(b"0\r\n\r\n")

    def run(self) -> RawPost:
        started = time.monotonic()
        self.sender.start()
        reader = self.sock.makefile("rb")
        self.status = int(reader.readline().split()[1])
        length = 0
        while (line := reader.readline().strip()):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        self.json = orjson.loads(reader.read(length))
        self.seconds = time.monotonic() - started
        self.sender.join(30)  # the server reads the rest and throws it away
        self.sock.close()
        return self


def _answered(post: RawPost, status: int, code: str) -> dict[str, Any]:
    assert post.status == status, post.json
    body = post.json["error"]
    assert body["code"] == code and body["message"], body
    return body


def _cheap_answer(m: PeakGrowth, post: RawPost, what: str) -> None:
    _cheap(m, what)
    print(f"  answered after {post.seconds:.2f} s")
    assert post.seconds < MAX_SECONDS, f"{what}: answered after {post.seconds:.1f} s"


JSON = {"Content-Type": "application/json"}


def test_60mb_body_with_length_refused_before_auth(server: ServerProcess) -> None:
    with PeakGrowth(_pid(server)) as m:
        post = RawPost(server, "/v1/chats/x/generate", JSON, _chunks(60 * MB), 60 * MB).run()
    error = _answered(post, 413, "too_large")
    assert "33554432" in error["message"]  # the documented 32 MiB limit is named
    _cheap_answer(m, post, "60 MB unauthenticated body (Content-Length)")


def test_60mb_chunked_body_without_a_token_refused_unread(server: ServerProcess) -> None:
    """No length to judge by: the token is checked before a byte of the body is read."""
    with PeakGrowth(_pid(server)) as m:
        post = RawPost(server, "/v1/chats/x/generate", JSON, _chunks(60 * MB)).run()
    _answered(post, 401, "unauthorized")
    _cheap_answer(m, post, "60 MB unauthenticated chunked body")


def test_60mb_chunked_body_with_a_bad_token_refused_unread(server: ServerProcess) -> None:
    with PeakGrowth(_pid(server)) as m:
        post = RawPost(server, "/v1/chats/x/generate",
                       {**JSON, "Authorization": "Bearer evc_not_a_token"},
                       _chunks(60 * MB)).run()
    _answered(post, 401, "unauthorized")
    _cheap_answer(m, post, "60 MB chunked body, unknown token")


def test_60mb_chunked_json_from_the_master_refused(server: ServerProcess) -> None:
    with PeakGrowth(_pid(server)) as m:
        post = RawPost(server, "/v1/chats", {**JSON, **_master(server)},
                       _chunks(60 * MB, b"[" + b"[]," * 30000)).run()
    _answered(post, 413, "too_large")
    _cheap_answer(m, post, "60 MB chunked JSON (master)")


def test_60mb_json_card_refused(server: ServerProcess, api: httpx.Client) -> None:
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/characters", content=_chunks(60 * MB, b'{"a":' + b" " * 65531),
                     headers={"Content-Type": "application/json", **_master(server)})
    _error(r, 413, "too_large")
    _cheap(m, "60 MB JSON card body (master)")


def test_60mb_upload_refused_without_auth_before_reading(server: ServerProcess) -> None:
    head = (b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="big.png"'
            b"\r\n\r\n")
    size = len(head) + 60 * MB + 14
    parts = itertools.chain([head], _chunks(60 * MB, b"\0" * 65536), [b"\r\n--b0undary--\r\n"])
    with PeakGrowth(_pid(server)) as m:
        post = RawPost(server, "/v1/characters",
                       {"Content-Type": "multipart/form-data; boundary=b0undary"},
                       parts, size).run()
    _answered(post, 401, "unauthorized")
    _cheap_answer(m, post, "60 MB unauthenticated upload")


# -- a 16383² WebP icon ---------------------------------------------------------------------

def test_16383_webp_icon_refused_on_import(server: ServerProcess, api: httpx.Client) -> None:
    icon = solid_webp(16383, 16383)
    assert len(icon) < 7000
    archive = charx_with_icon(icon)
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/characters", files={"file": ("big.charx", archive)},
                     headers=_master(server))
    error = _error(r, 413, "too_large")
    assert str(16383 * 16383) in error["message"], error
    _cheap(m, "16383² WebP icon import")
    listed = api.get("/v1/characters", headers=_master(server)).json()
    assert all(c["name"] != "Big Icon" for c in listed["characters"])  # nothing stored


async def _store_raw(db_url: str, icon: bytes, name: str) -> str:
    """A card with this icon written straight to the server's database (as an older
    release would have stored it, before imports checked image sizes)."""
    engine = create_engine(db_url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False).begin() as s:
            card = Card(spec="chara_card_v3", data={"name": name, "first_mes": "Hi."},
                        extra_top={}, image=icon,
                        assets=[CardAsset("main", "icon", "webp", "ccdefault:", icon)])
            stored = await store_card(s, card)
            return stored.character.id
    finally:
        await engine.dispose()


@pytest.mark.parametrize("side", [12000, 16383])
def test_big_webp_icon_export_is_a_clear_4xx(server: ServerProcess, api: httpx.Client,
                                             side: int) -> None:
    """12000² is the 2.9 GB / 10 s export; 16383² was a 500 (DecompressionBombError)."""
    db_url = server.env["EVACORE_DATABASE_URL"]
    character_id = asyncio.run(_store_raw(db_url, solid_webp(side, side), f"Stored {side}"))
    with PeakGrowth(_pid(server)) as m:
        r = api.get(f"/v1/characters/{character_id}/export", params={"format": "png"},
                    headers=_master(server))
    error = _error(r, 422, "invalid_input")
    assert str(side * side) in error["message"] and "JSON or CHARX" in error["message"], error
    _cheap(m, f"{side}² WebP icon PNG export")
    r = api.get(f"/v1/characters/{character_id}/export", params={"format": "charx"},
                headers=_master(server))
    assert r.status_code == 200  # the other formats carry the icon untouched
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        assert solid_webp(side, side) in [z.read(n) for n in z.namelist()]


# -- a 200k-entry lorebook ------------------------------------------------------------------

def _lorebook(entries: int) -> bytes:
    parts = [f'"{i}":{{"uid":{i},"key":["k{i}"],"content":"c"}}' for i in range(entries)]
    return ('{"entries":{' + ",".join(parts) + "}}").encode()


def test_200k_entry_lorebook_refused(server: ServerProcess, api: httpx.Client) -> None:
    book = _lorebook(200_000)
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/lorebooks/import", content=book,
                     headers={"Content-Type": "application/json", **_master(server)})
    error = _error(r, 413, "too_large")
    assert "100000" in error["message"], error
    _cheap(m, f"200k-entry lorebook ({len(book) / MB:.1f} MB) JSON body")
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/lorebooks/import", files={"file": ("big.json", book)},
                     headers=_master(server))
    _error(r, 413, "too_large")
    _cheap(m, "200k-entry lorebook upload")
    assert api.get("/v1/lorebooks", headers=_master(server)).json()["lorebooks"] == []


def test_200k_entry_list_lorebook_refused(server: ServerProcess, api: httpx.Client) -> None:
    entries = ",".join(f'{{"keys":["k{i}"],"content":"c"}}' for i in range(200_000))
    book = ('{"spec":"lorebook_v3","data":{"entries":[' + entries + "]}}").encode()
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/lorebooks/import", content=book,
                     headers={"Content-Type": "application/json", **_master(server)})
    _error(r, 413, "too_large")
    _cheap(m, "200k-entry lorebook_v3 list")


# -- chats ------------------------------------------------------------------------------------

def _chat_count(api: httpx.Client, server: ServerProcess) -> int:
    r = api.get("/v1/chats", params={"limit": 1000}, headers=_master(server))
    assert r.status_code == 200, r.text
    return len(r.json()["chats"])


def test_300k_line_chat_refused_while_read(server: ServerProcess, api: httpx.Client) -> None:
    lines = [json.dumps({"user_name": "U", "character_name": "C"})]
    lines += ['{"name":"U","is_user":true,"mes":"hi"}'] * 300_000
    chat = "\n".join(lines).encode()
    before = _chat_count(api, server)
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/chats/import", files={"file": ("big.jsonl", chat)},
                     headers=_master(server))
    error = _error(r, 413, "too_large")
    assert "100000" in error["message"], error
    _cheap(m, f"300k-line chat ({len(chat) / MB:.1f} MB)")
    assert _chat_count(api, server) == before  # nothing stored


def test_40mb_chat_message_refused(server: ServerProcess, api: httpx.Client) -> None:
    header = json.dumps({"user_name": "U", "character_name": "C"})
    line = '{"name":"U","is_user":true,"mes":"' + "x" * (40 * MB) + '"}'
    chat = (header + "\n" + line).encode()
    with PeakGrowth(_pid(server)) as m:
        r = api.post("/v1/chats/import", files={"file": ("huge.jsonl", chat)},
                     headers=_master(server))
    error = _error(r, 413, "too_large")
    assert "line 2" in error["message"], error
    _cheap(m, "40 MB chat message")


def test_the_server_still_answers(server: ServerProcess, api: httpx.Client) -> None:
    r = api.post("/v1/chats", json={}, headers=_master(server))
    assert r.status_code == 201, r.text
    assert api.get("/v1/health").status_code == 200
