"""The large parts of a tour's stored provider requests, kept once: the tool definitions that
most requests repeat word for word (twelve built-in tools are ~7 KB of every request's JSON)
and each long message of the conversation (every tour's request repeats the chat's history,
so a record holding it whole made a chat's stored records grow with the square of its
length) are written to `request_parts` under their digest, and the tour's record holds the
digest in their place; reading the record puts them back, so `GET /v1/tours/{id}` shows the
exact request as before.

A message's part belongs to the chat whose tour sent it (its digest is of the chat and the
message, and it is deleted with the chat, as the tours that name it are); a tool set's
belongs to none. A part is stored (redacted) in the transaction that writes the record
naming it, the first time this process meets it in a database (`named`, then `store` in that
transaction and `committed` after it); a part already there is left as it is, so two tours
(or two instances) meeting the same part at once both name it. After that a tour pays for
its digest alone, and the part is stored again (or found there) once a minute. Parts are
never changed, a chat's go only with the chat and its tours, and a record never names a part
its own transaction did not find or store.

Must not: hold a part that differs from what the request sent (the digest is of the exact
JSON), or lose a part: when storing one fails, the record keeps it inline.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections import OrderedDict
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Insert, null, select
from sqlalchemy.dialects import postgresql, sqlite

from evacore.domain.ids import utcnow
from evacore.redact import redact_json
from evacore.store import direct
from evacore.store.tables import RequestPart

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.store.db import Database

KEYS = ("tools",)
"""The keys of a request's body whose whole value is kept apart when large."""
MIN_BYTES = 1024
"""A smaller value stays in the record: a row of its own would cost more than it saves."""
LIST_KEYS = ("messages",)
"""The keys of a request's body whose items are each kept apart when large: the messages,
which the next tour's request repeats with one or two more."""
MESSAGE_MIN_BYTES = 512
"""A shorter message stays in the record: its reference (about 50 bytes) and a row of its own
would save little, and every tour would hash it."""
_QUICK_CHARS = (MESSAGE_MIN_BYTES - 64) // 6
"""A message of a role and a text shorter than this is shorter than `MESSAGE_MIN_BYTES` as
JSON whatever its characters (at most 6 bytes each, escaped; a role is a short word): it is
left inline without serializing it."""
_PLAIN_KEYS = frozenset(("role", "content"))
REF = "$request_part"
"""The one key of what stands in a record for a part: `{"$request_part": digest}`."""
_KNOWN_MAX = 8192
"""Digests remembered as stored per database (the least recently used go first): each long
message of the chats being talked in is one."""
_LOOK_FIRST = 3
"""From this many parts to store on, those stored already are looked up in one statement
first, each found one sparing its redaction and its insert: a tour's request names every
long message of its chat, and all of them come back to be checked once `KNOWN_SECONDS`
passed or after the chat's digests left `_KNOWN_MAX` (a tour usually brings two new ones)."""
KNOWN_SECONDS = 60.0
"""How long a part is taken as stored without looking: a database restored or migrated down
and up under a running server is seen within this time, and the part stored again."""
_known: weakref.WeakKeyDictionary[Database, OrderedDict[str, float]] = \
    weakref.WeakKeyDictionary()
"""Per database: digest -> when it was last seen stored (`_now()`)."""
_now = time.monotonic
_digests: dict[bytes, str] = {}
"""The digests of the tool sets met lately, by their JSON: hashing the same ~7 KB again for
every tour costs more than looking it up."""
_DIGESTS_MAX = 64
_IN_BATCH = 500
"""Digests looked up or read back in one statement at most."""

_Part = tuple[str, "int | None", str, Any]
"""(key of the body, index in its list or None for the whole value, digest, value)."""


def named(db: Database, diagnostics: dict[str, Any], chat_id: str | None = None
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """`diagnostics` with each request body's large parts (`KEYS`' values and, for a tour of
    the chat `chat_id`, `LIST_KEYS`' items) replaced by a reference (a copy when anything
    was; the same dict otherwise), and the parts among them not known stored in `db`
    (digest -> (value, chat id or None)), which the caller stores with `store` in the
    transaction that writes the record, then reports `committed`."""
    requests = diagnostics.get("requests")
    if not isinstance(requests, list) or not requests:
        return diagnostics, {}
    plans = [_parts_of(body, chat_id) if (body := _body(request)) is not None else []
             for request in requests]
    if not any(plans):
        return diagnostics, {}
    known, now = _known_of(db), _now()
    pending: dict[str, Any] = {}
    out: list[Any] = []
    for request, parts in zip(requests, plans, strict=True):
        for _, index, digest, value in parts:
            checked = known.get(digest)
            if checked is not None and now - checked < KNOWN_SECONDS:
                known.move_to_end(digest)
            else:
                pending[digest] = (value, None if index is None else chat_id)
        out.append({**request, "body": _named(request["body"], parts)} if parts else request)
    return {**diagnostics, "requests": out}, pending


async def store(session: AsyncSession, parts: dict[str, Any]) -> None:
    """Insert `parts` (digest -> (value, chat id), from `named`), redacted, in the session's
    transaction; a part already stored is left as it is."""
    if len(parts) >= _LOOK_FIRST:
        found = await _present(session, list(parts))
        parts = {digest: part for digest, part in parts.items() if digest not in found}
    if not parts:
        return
    bind = session.bind
    statement = _insert_new(bind.dialect.name if bind is not None else "")
    created = utcnow()
    for digest, (value, chat_id) in parts.items():
        await direct.execute(session, statement, {
            "digest": digest, "value": redact_json(value), "created_at": created,
            "chat_id": chat_id})


async def _present(session: AsyncSession, digests: list[str]) -> set[str]:
    """Those of `digests` stored already."""
    return {digest for digest, _ in await _rows(session, digests, values=False)}


async def _rows(session: AsyncSession, digests: list[str], *, values: bool = True
                ) -> list[tuple[str, Any]]:
    """(digest, value or None) of each of `digests` stored, `_IN_BATCH` a statement."""
    value = RequestPart.value if values else null()
    rows: list[tuple[str, Any]] = []
    for at in range(0, len(digests), _IN_BATCH):
        found = await session.execute(select(RequestPart.digest, value).where(
            RequestPart.digest.in_(digests[at:at + _IN_BATCH])))
        rows.extend((digest, part) for digest, part in found)
    return rows


def committed(db: Database, parts: dict[str, Any]) -> None:
    """`parts` are in `db` now (the transaction that stored them committed)."""
    if not parts:
        return
    known, now = _known_of(db), _now()
    for digest in parts:
        known[digest] = now
        known.move_to_end(digest)
    while len(known) > _KNOWN_MAX:
        known.popitem(last=False)


def _known_of(db: Database) -> OrderedDict[str, float]:
    known = _known.get(db)
    if known is None:
        known = _known[db] = OrderedDict()
    return known


@cache
def _insert_new(dialect: str) -> Insert:
    """`INSERT` of one part that leaves a part already stored as it is."""
    table = RequestPart.__table__
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=["digest"])
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=["digest"])


def _parts_of(body: dict[str, Any], chat_id: str | None) -> list[_Part]:
    """The parts of one request's body large enough to keep apart (messages only for a
    chat's tour: a part of no chat is never deleted)."""
    parts: list[_Part] = []
    for key in KEYS:
        value = body.get(key)
        if not isinstance(value, list) or not value:
            continue
        try:
            raw = orjson.dumps(value)
        except TypeError:
            continue
        if len(raw) < MIN_BYTES:
            continue
        digest = _digests.get(raw)
        if digest is None:
            digest = _digests[raw] = _hash(raw)
            if len(_digests) > _DIGESTS_MAX:
                del _digests[next(iter(_digests))]
        parts.append((key, None, digest, value))
    owner = f"{chat_id}\n".encode() if chat_id is not None else b""
    for key in LIST_KEYS if chat_id is not None else ():
        items = body.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if type(item) is not dict:
                continue
            content = item.get("content")
            if (type(content) is str and len(content) < _QUICK_CHARS
                    and item.keys() <= _PLAIN_KEYS):
                continue  # short whatever its characters: not serialized to be measured
            try:
                raw = orjson.dumps(item)
            except TypeError:
                continue
            if len(raw) >= MESSAGE_MIN_BYTES:
                parts.append((key, index, _hash(owner + raw), item))
    return parts


def _hash(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _named(body: dict[str, Any], parts: list[_Part]) -> dict[str, Any]:
    """A copy of `body` with each of `parts` replaced by its reference."""
    new_body = dict(body)
    copied: set[str] = set()
    for key, index, digest, _ in parts:
        if index is None:
            new_body[key] = {REF: digest}
            continue
        if key not in copied:
            new_body[key] = list(new_body[key])
            copied.add(key)
        new_body[key][index] = {REF: digest}
    return new_body


async def resolved(session: AsyncSession, diagnostics: dict[str, Any]) -> dict[str, Any]:
    """`diagnostics` as the tour sent its requests: each reference replaced by its stored
    part (one query per few hundred); a reference whose part is missing stays as it is."""
    requests = diagnostics.get("requests")
    if not isinstance(requests, list):
        return diagnostics
    wanted: set[str] = set()
    for request in requests:
        for key, value in (_body(request) or {}).items():
            if (digest := _digest(value)) is not None:
                wanted.add(digest)
            elif key in LIST_KEYS and isinstance(value, list):
                wanted.update(d for item in value if (d := _digest(item)) is not None)
    if not wanted:
        return diagnostics
    parts = dict(await _rows(session, sorted(wanted)))

    def part(value: Any) -> Any:
        digest = _digest(value)
        return value if digest is None else parts.get(digest, value)

    out = []
    for request in requests:
        body = _body(request)
        if body is not None:
            request = {**request, "body": {
                key: [part(item) for item in value]
                if key in LIST_KEYS and isinstance(value, list) else part(value)
                for key, value in body.items()}}
        out.append(request)
    return {**diagnostics, "requests": out}


def _digest(value: Any) -> str | None:
    """The digest a reference names; None when `value` is no reference."""
    if isinstance(value, dict) and len(value) == 1:
        digest = value.get(REF)
        if isinstance(digest, str):
            return digest
    return None


def _body(request: Any) -> dict[str, Any] | None:
    """A stored request's body, when it is a JSON object."""
    body = request.get("body") if isinstance(request, dict) else None
    return body if isinstance(body, dict) else None
