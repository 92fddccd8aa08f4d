"""Model ids of the facade: the list a client picks from (`GET /v1/models`) and what a
request's `model` names: `<character>`, `<character>@<connection>` or `@<connection>`.

Must not: create anything. Names match case-insensitively (Unicode case folding); when two
characters or two connections share a name, the one created first is meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

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


class _Names(NamedTuple):
    rows: list[Any]
    """Oldest first."""
    by_name: dict[str, Any]
    """Folded name -> the oldest row of that name (in the rows' order)."""


async def _characters(session: AsyncSession) -> _Names:
    return await recall(session, "models", "characters", lambda: _names(session, _CHARACTERS))


async def _connections(session: AsyncSession) -> _Names:
    """The connections; the offline `mock` is made first on a fresh data dir."""
    names = await recall(session, "models", "connections",
                         lambda: _names(session, _CONNECTIONS))
    if not any(row.kind == "mock" for row in names.rows):
        await ensure_mock(session)
        names = await _names(session, _CONNECTIONS)
    return names


async def _names(session: AsyncSession, stmt: Any) -> _Names:
    """The rows and their index by name, remembered together: every facade request resolves
    its model by name, and folding every name of a library of hundreds of characters each
    time cost more than the lookup."""
    rows = list((await session.execute(stmt)).all())
    by_name: dict[str, Any] = {}
    for row in rows:
        by_name.setdefault(_key(row.name), row)
    return _Names(rows, by_name)


async def list_models(session: AsyncSession) -> list[dict[str, Any]]:
    """One entry per character name and one per connection (`@<name>`), oldest first."""
    out = []
    for names, prefix in ((await _characters(session), ""), (await _connections(session), "@")):
        for row in names.by_name.values():
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
    characters = (await _characters(session)).by_name
    whole = characters.get(_key(model))
    if whole is not None:
        conn = await default_connection(session)
        return Target(model, whole.id, whole.name, conn.id, conn.max_tokens)
    if "@" not in model:
        raise not_found(model)
    connections = (await _connections(session)).by_name
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
