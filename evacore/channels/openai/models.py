"""Model ids of the facade: the list a client picks from (`GET /v1/models`) and what a
request's `model` names: `<character>`, `<character>@<connection>` or `@<connection>`.

Must not: create anything. Names match case-insensitively (Unicode case folding); when two
characters or two connections share a name, the one created first is meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.channels.openai.errors import FacadeError
from evacore.store.connections import default_connection, ensure_mock
from evacore.store.recall import forget, recall
from evacore.store.tables import Character, Connection


@dataclass(frozen=True)
class Target:
    """What a model id resolves to: a character (None: the built-in default) on a connection."""

    model: str
    character_id: str | None
    character_name: str | None
    connection_id: str
    max_tokens: int
    """The connection's answer length: the most a request's `max_tokens` may ask for."""


def _key(name: str) -> str:
    return name.casefold()


_CHARACTERS = select(Character.id, Character.name, Character.created_at).order_by(
    Character.created_at, Character.id)
_CONNECTIONS = select(Connection.id, Connection.name, Connection.created_at,
                      Connection.max_tokens, Connection.kind).order_by(
    Connection.created_at, Connection.id)
"""Built once; what they read is remembered for a moment (`store/recall.py`), forgotten at
once when this process writes either table: every facade request resolves its model."""


async def _characters(session: AsyncSession) -> list[Any]:
    return await recall(session, "models", "characters",
                        lambda: _rows(session, _CHARACTERS))


async def _connections(session: AsyncSession) -> list[Any]:
    """The connections; the offline `mock` is made first on a fresh data dir."""
    rows = await recall(session, "models", "connections", lambda: _rows(session, _CONNECTIONS))
    if not any(row.kind == "mock" for row in rows):
        await ensure_mock(session)
        rows = await _rows(session, _CONNECTIONS)
    return rows


async def _rows(session: AsyncSession, stmt: Any) -> list[Any]:
    return list((await session.execute(stmt)).all())


def _first_by_name(rows: list[Any]) -> dict[str, Any]:
    """The rows by folded name, the first of a name kept. Made once for the list `recall`
    hands out (the same list while it is remembered): every facade request resolves its
    model, and a library of hundreds of characters made it fold every name each time."""
    hit = _BY_NAME.get(id(rows))
    if hit is not None and hit[0] is rows:
        return hit[1]
    found: dict[str, Any] = {}
    for row in rows:
        found.setdefault(_key(row.name), row)
    if len(_BY_NAME) >= _BY_NAME_KEPT:
        _BY_NAME.clear()
    _BY_NAME[id(rows)] = (rows, found)
    return found


_BY_NAME: dict[int, tuple[list[Any], dict[str, Any]]] = {}
"""The lists `_first_by_name` read last (each held, so its id is not reused while kept)."""
_BY_NAME_KEPT = 8


async def list_models(session: AsyncSession) -> list[dict[str, Any]]:
    """One entry per character name and one per connection (`@<name>`), oldest first."""
    out = []
    for rows, prefix in ((await _characters(session), ""), (await _connections(session), "@")):
        for row in _first_by_name(rows).values():
            out.append({"id": f"{prefix}{row.name}", "object": "model",
                        "created": int(row.created_at.timestamp()) if row.created_at else 0,
                        "owned_by": "evacore"})
    return out


def not_found(model: str) -> FacadeError:
    return FacadeError(404, f"The model `{model}` does not exist or you do not have access "
                       "to it. GET /v1/models lists the characters and connections.",
                       code="model_not_found", param="model")


async def resolve(session: AsyncSession, model: str) -> Target:
    """The character and connection `model` names; unknown → 404 `model_not_found`. A name
    the remembered lists lack is looked for again in the database before it is refused (it
    may have been made a moment ago through another instance)."""
    try:
        return await _resolve(session, model)
    except FacadeError:
        forget(session, "models")
        return await _resolve(session, model)


async def _resolve(session: AsyncSession, model: str) -> Target:
    characters = _first_by_name(await _characters(session))
    whole = characters.get(_key(model))
    if whole is not None:
        conn = await default_connection(session)
        return Target(model, whole.id, whole.name, conn.id, conn.max_tokens)
    if "@" not in model:
        raise not_found(model)
    connections = _first_by_name(await _connections(session))
    # every split at an "@" (names may hold one themselves); the first that names both wins
    for at in (i for i, ch in enumerate(model) if ch == "@"):
        char_part, conn_part = model[:at], model[at + 1:]
        conn = connections.get(_key(conn_part))
        if conn is None:
            continue
        if not char_part:
            return Target(model, None, None, conn.id, conn.max_tokens)
        char = characters.get(_key(char_part))
        if char is not None:
            return Target(model, char.id, char.name, conn.id, conn.max_tokens)
    raise not_found(model)
