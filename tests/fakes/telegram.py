"""FakeBotApi: a loopback Telegram Bot API server that the real aiogram client talks to.

Methods at `/bot<token>/<method>` and files at `/file/bot<token>/<path>`, answered in
Telegram's shapes (`{"ok": true, "result": ...}`, `{"ok": false, "error_code",
"description", "parameters": {"retry_after"}}`), with Telegram's refusals: 400 for an empty
or too long text, entities out of range, a reaction emoji not on the list; 409 when two
getUpdates overlap or getUpdates meets a webhook; 401 for a wrong token; and faults a test
queues (`fail("sendMessage", 429, retry_after=1)`, `fail(..., status=0)` for a dropped
connection). Tests push messages with `say(...)` and read what the bot did in `calls`.

Must not: bind anything but loopback.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import orjson

from tests.fakes.server import ClientGone, Exchange, LoopbackServer, Served

TOKEN = "123456789:TEST-fake_bot_token_0123456789abcdef"
BOT_ID = 123456789
BOT_USERNAME = "eva_test_bot"
REACTIONS = frozenset((
    "❤", "👍", "👎", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮",
    "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤‍🔥", "🌚", "🌭", "💯", "🤣", "⚡",
    "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻",
    "👨‍💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅",
    "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂", "🤷", "🤷‍♀",
    "😡"))
# a 1x1 PNG
PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360f8cfc0f01f0005000201e5273ee10000000049454e44ae426082")


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    status: int = 200
    ended: float | None = None
    """getUpdates: when the answer went out (or the client left)."""


@dataclass
class Fault:
    status: int
    """0: drop the connection (a network error); -1: let the call through."""
    description: str
    retry_after: int | None = None


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def user(uid: int, first: str = "Alex", last: str | None = None,
         username: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": uid, "is_bot": False, "first_name": first}
    if last:
        out["last_name"] = last
    if username:
        out["username"] = username
    return out


class FakeBotApi(Served):
    def __init__(self, token: str = TOKEN, *, privacy: bool = True) -> None:
        self.token = token
        self.privacy = privacy
        self.calls: list[Call] = []
        self.faults: dict[str, list[Fault]] = {}
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.webhook: dict[str, Any] | None = None
        self.conflicts = 0
        self._ids = itertools.count(1000)
        self._update_ids = itertools.count(1)
        self._polls: list[Call] = []
        self._lock = threading.Lock()
        self.server = LoopbackServer(self._handle)

    # what a test does
    def fail(self, method: str, status: int, description: str = "", *, times: int = 1,
             retry_after: int | None = None, after: int = 0) -> None:
        """The next `times` calls of `method` (after `after` that go through) fail."""
        text = description or {429: "Too Many Requests: retry after "
                               f"{retry_after}", 400: "Bad Request", 409: "Conflict",
                               500: "Internal Server Error", 0: ""}.get(status, "Error")
        with self._lock:
            queue = self.faults.setdefault(method, [])
            queue.extend(Fault(-1, "") for _ in range(after))
            queue.extend(Fault(status, text, retry_after) for _ in range(times))

    def add_file(self, data: bytes = PIXEL_PNG, path: str = "photos/file_0.png") -> str:
        file_id = f"file{len(self.files)}"
        self.files[file_id] = (path, data)
        return file_id

    def message(self, chat_id: int, sender: dict[str, Any] | None, text: str | None = None, *,
                chat_type: str = "private", title: str | None = None,
                reply_to: dict[str, Any] | None = None,
                entities: list[dict[str, Any]] | None = None,
                **extra: Any) -> dict[str, Any]:
        """An incoming message (not queued)."""
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private" and sender:
            chat["first_name"] = sender.get("first_name", "")
        else:
            chat["title"] = title or "Test group"
        msg: dict[str, Any] = {"message_id": next(self._ids), "date": int(time.time()),
                               "chat": chat, **extra}
        if sender is not None:
            msg["from"] = sender
        if text is not None:
            msg["text"] = text
        if entities:
            msg["entities"] = entities
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        return msg

    def say(self, chat_id: int, sender: dict[str, Any], text: str | None = None,
            **kw: Any) -> dict[str, Any]:
        """Queue an incoming message for getUpdates; returns it."""
        msg = self.message(chat_id, sender, text, **kw)
        self.push({"message": msg})
        return msg

    def push(self, update: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            update = {"update_id": next(self._update_ids), **update}
            self.updates.append(update)
        return update

    def update(self, message: dict[str, Any]) -> dict[str, Any]:
        """An update for a webhook post (not queued)."""
        return {"update_id": next(self._update_ids), "message": message}

    # what a test reads
    def of(self, method: str) -> list[Call]:
        return [c for c in list(self.calls) if c.method == method and c.status == 200]

    def sent(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        return [c.params for c in self.of("sendMessage")
                if chat_id is None or int(c.params["chat_id"]) == chat_id]

    @property
    def polls(self) -> list[Call]:
        return list(self._polls)

    async def wait_for(self, check: Any, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting; calls: {[c.method for c in self.calls]}")
            await asyncio.sleep(0.02)

    # the server
    async def _handle(self, ex: Exchange) -> None:
        req = ex.request
        params = _params(req.headers, req.body, req.query)
        path = req.path
        if path.startswith("/file/bot"):
            token, _, file_path = path[len("/file/bot"):].partition("/")
            for stored_path, data in self.files.values():
                if token == self.token and stored_path == file_path:
                    ex.send(200, data, content_type="application/octet-stream")
                    return
            ex.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        if not path.startswith("/bot"):
            ex.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, _, method = path[len("/bot"):].partition("/")
        call = Call(method, params)
        self.calls.append(call)
        if token != self.token:
            call.status = 401
            ex.send_json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        with self._lock:
            queued = self.faults.get(method)
            fault = queued.pop(0) if queued else None
        if fault is not None and fault.status == -1:
            fault = None  # this one goes through
        if fault is not None:
            call.status = fault.status or 599
            if fault.status == 0:
                ex.reset()
                return
            body: dict[str, Any] = {"ok": False, "error_code": fault.status,
                                    "description": fault.description}
            if fault.retry_after is not None:
                body["parameters"] = {"retry_after": fault.retry_after}
            ex.send_json(fault.status, body)
            return
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            call.status = 404
            ex.send_json(404, {"ok": False, "error_code": 404,
                               "description": "Not Found: method not found"})
            return
        try:
            result = await handler(ex, call, params)
        except _Refusal as exc:
            call.status = exc.status
            ex.send_json(exc.status, {"ok": False, "error_code": exc.status,
                                      "description": exc.description})
            return
        if not ex.done:
            ex.send_json(200, {"ok": True, "result": result})

    # methods
    async def _m_getMe(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Eva", "username": BOT_USERNAME,
                "can_join_groups": True, "can_read_all_group_messages": not self.privacy,
                "supports_inline_queries": False}

    async def _m_deleteWebhook(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    async def _m_setWebhook(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        if not str(p.get("url", "")).startswith("https://"):
            raise _Refusal(400, "Bad Request: bad webhook: An HTTPS URL must be provided "
                           "for webhook")
        self.webhook = {"url": p["url"], "secret_token": p.get("secret_token")}
        return True

    async def _m_getUpdates(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        if self.webhook is not None:
            raise _Refusal(409, "Conflict: can't use getUpdates method while webhook is "
                           "active; use deleteWebhook to delete the webhook first")
        with self._lock:
            live = [c for c in self._polls if c.ended is None]
            self._polls.append(call)
        if live:
            self.conflicts += 1
            call.ended = time.monotonic()
            raise _Refusal(409, "Conflict: terminated by other getUpdates request; make "
                           "sure that only one bot instance is running")
        offset = int(p.get("offset") or 0)
        timeout = float(p.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        try:
            while True:
                with self._lock:
                    if offset:
                        self.updates = [u for u in self.updates if u["update_id"] >= offset]
                    ready = list(self.updates[:100])
                if ready or time.monotonic() >= deadline:
                    call.ended = time.monotonic()
                    return ready
                await ex.sleep(0.02)
        except ClientGone:
            call.ended = time.monotonic()
            raise

    async def _m_sendMessage(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        text = str(p.get("text") or "")
        if not text.strip():
            raise _Refusal(400, "Bad Request: message text is empty")
        if _utf16(text) > 4096:
            raise _Refusal(400, "Bad Request: message is too long")
        if p.get("parse_mode"):
            raise _Refusal(400, "Bad Request: this fake takes entities, not parse_mode")
        for e in p.get("entities") or []:
            if e["offset"] < 0 or e["length"] <= 0 or e["offset"] + e["length"] > _utf16(text):
                raise _Refusal(400, "Bad Request: can't parse entities: entity is out of "
                               "the text")
        msg = {"message_id": next(self._ids), "date": int(time.time()),
               "chat": {"id": int(p["chat_id"]), "type": "private"},
               "from": {"id": BOT_ID, "is_bot": True, "first_name": "Eva",
                        "username": BOT_USERNAME}, "text": text}
        if p.get("entities"):
            msg["entities"] = p["entities"]
        call.params["message_id"] = msg["message_id"]
        return msg

    async def _m_sendChatAction(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        return True

    async def _m_sendMessageDraft(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        if not int(p.get("draft_id") or 0):
            raise _Refusal(400, "Bad Request: draft_id must be non-zero")
        return True

    async def _m_setMessageReaction(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        for r in p.get("reaction") or []:
            if r.get("type") == "emoji" and r.get("emoji") not in REACTIONS:
                raise _Refusal(400, "Bad Request: REACTION_INVALID")
        return True

    async def _m_getFile(self, ex: Exchange, call: Call, p: dict[str, Any]) -> Any:
        found = self.files.get(str(p.get("file_id")))
        if found is None:
            raise _Refusal(400, "Bad Request: invalid file_id")
        return {"file_id": p["file_id"], "file_unique_id": f"u{p['file_id']}",
                "file_size": len(found[1]), "file_path": found[0]}


class _Refusal(Exception):
    def __init__(self, status: int, description: str) -> None:
        self.status, self.description = status, description


def _params(headers: dict[str, str], body: bytes, query: str) -> dict[str, Any]:
    """A Bot API call's parameters: JSON, urlencoded or multipart; JSON-looking values of a
    form (lists, objects) decoded as Telegram does."""
    kind = headers.get("content-type", "")
    raw: dict[str, Any] = {}
    if "application/json" in kind and body:
        raw = orjson.loads(body)
        return raw if isinstance(raw, dict) else {}
    if "multipart/form-data" in kind:
        msg = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + kind.encode() + b"\r\n\r\n" + body)
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name:
                raw[name] = part.get_content() if part.get_filename() is None else \
                    part.get_payload(decode=True)
    else:
        raw = dict(urllib.parse.parse_qsl(body.decode() if body else query,
                                          keep_blank_values=True))
    out = {}
    for key, value in raw.items():
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        out[key] = value
    return out
