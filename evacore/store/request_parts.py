"""The large parts of a tour's stored provider requests, kept once: the tool definitions that
most requests repeat word for word (twelve built-in tools are ~7 KB of every request's JSON)
are written to `request_parts` under their digest, and the tour's record holds the digest in
their place; reading the record puts them back, so `GET /v1/tours/{id}` shows the exact
request as before.

A part is stored (redacted, in a transaction of its own, committed before the tour's record
that names it) the first time this process meets it in a database; after that a tour pays
for its digest alone, and the part is looked for again once a minute. Parts are never
changed or deleted: a record names a part only once it is committed.

Must not: hold a part that differs from what the request sent (the digest is of the exact
JSON), or lose a part: when storing one fails, the record keeps it inline.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import bindparam, select

from evacore.logs import get_logger
from evacore.redact import redact_json
from evacore.store.tables import RequestPart

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.store.db import Database

log = get_logger(__name__)
KEYS = ("tools",)
"""The keys of a request's body whose value is kept apart when large."""
MIN_BYTES = 1024
"""A smaller value stays in the record: a row of its own would cost more than it saves."""
REF = "$request_part"
"""The one key of what stands in a record for a part: `{"$request_part": digest}`."""
_KNOWN_MAX = 256
"""Digests remembered as stored per database (the least recently used go first)."""
KNOWN_SECONDS = 60.0
"""How long a part is taken as stored without looking: a database restored or migrated down
and up under a running server is seen within this time, and the part stored again."""
_known: weakref.WeakKeyDictionary[Database, OrderedDict[str, float]] = \
    weakref.WeakKeyDictionary()
"""Per database: digest -> when it was last seen stored (`_now()`)."""
_now = time.monotonic
_digests: dict[bytes, str] = {}
"""The digests of the parts met lately, by their JSON: hashing the same ~7 KB again for
every tour costs more than looking it up."""
_DIGESTS_MAX = 64
_FIND = select(RequestPart.digest).where(RequestPart.digest == bindparam("p_digest"))


async def shared(db: Database, diagnostics: dict[str, Any]) -> dict[str, Any]:
    """`diagnostics` with each request body's large parts (`KEYS`) replaced by a reference
    to the stored part, storing those this process has not stored yet. A copy when anything
    was replaced; the same dict otherwise. A part that cannot be stored stays inline."""
    requests = diagnostics.get("requests")
    if not isinstance(requests, list) or not requests:
        return diagnostics
    out: list[Any] = []
    changed = False
    for request in requests:
        body = _body(request)
        if body is not None:
            new_body = await _share_body(db, body)
            if new_body is not body:
                request = {**request, "body": new_body}
                changed = True
        out.append(request)
    return {**diagnostics, "requests": out} if changed else diagnostics


async def _share_body(db: Database, body: dict[str, Any]) -> dict[str, Any]:
    new_body = body
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
            digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
            _digests[raw] = digest
            if len(_digests) > _DIGESTS_MAX:
                del _digests[next(iter(_digests))]
        if not await _stored(db, digest, value):
            continue
        if new_body is body:
            new_body = dict(body)
        new_body[key] = {REF: digest}
    return new_body


async def _stored(db: Database, digest: str, value: list[Any]) -> bool:
    """Whether the part is in the database (committed), storing it if it is not."""
    known = _known.get(db)
    if known is None:
        known = _known[db] = OrderedDict()
    checked = known.get(digest)
    if checked is not None and _now() - checked < KNOWN_SECONDS:
        known.move_to_end(digest)
        return True
    try:
        async with db.session() as s:
            if await s.scalar(_FIND, {"p_digest": digest}) is None:
                s.add(RequestPart(digest=digest, value=redact_json(value)))
    except Exception:  # noqa: BLE001 - another instance stored it meanwhile, or the database failed
        try:
            async with db.session() as s:
                found = await s.scalar(_FIND, {"p_digest": digest}) is not None
        except Exception:  # noqa: BLE001 - the record keeps the part inline
            found = False
        if not found:
            log.warning("request_part.not_stored", digest=digest)
            return False
    known[digest] = _now()
    known.move_to_end(digest)
    if len(known) > _KNOWN_MAX:
        known.popitem(last=False)
    return True


async def resolved(session: AsyncSession, diagnostics: dict[str, Any]) -> dict[str, Any]:
    """`diagnostics` as the tour sent its requests: each reference replaced by its stored
    part (one query for all); a reference whose part is missing stays as it is."""
    requests = diagnostics.get("requests")
    if not isinstance(requests, list):
        return diagnostics
    wanted = {digest for request in requests if (body := _body(request)) is not None
              for value in body.values() if (digest := _digest(value)) is not None}
    if not wanted:
        return diagnostics
    rows = await session.execute(
        select(RequestPart.digest, RequestPart.value).where(RequestPart.digest.in_(wanted)))
    parts = {digest: value for digest, value in rows}

    def part(value: Any) -> Any:
        digest = _digest(value)
        return value if digest is None else parts.get(digest, value)

    out = []
    for request in requests:
        body = _body(request)
        if body is not None:
            request = {**request, "body": {key: part(value) for key, value in body.items()}}
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
