"""Connection records (R12.2): CRUD, the built-in `mock` connection, masking of API keys.

Must not: return or log an API key; `connection_json` masks it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import NotFound
from evacore.store.settings import get_setting
from evacore.store.tables import Connection

KINDS = ("openai-chat", "openai-text", "anthropic", "kobold", "mock")
POSTPROCESS_MODES = (
    "none", "merge", "semi", "strict", "single", "merge_tools", "semi_tools", "strict_tools",
)
MOCK_NAME = "mock"


def mask_key(key: str | None) -> str | None:
    if not key:
        return None
    return "…" + key[-4:] if len(key) >= 12 else "****"


def connection_json(c: Connection) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "base_url": c.base_url,
        "api_key": mask_key(c.api_key),
        "has_api_key": bool(c.api_key),
        "model": c.model,
        "context_size": c.context_size,
        "max_tokens": c.max_tokens,
        "tokenizer": c.tokenizer,
        "vision": c.vision,
        "prefill": c.prefill,
        "postprocess": c.postprocess,
        "instruct": c.instruct,
        "params": c.params or {},
        "created_at": c.created_at.isoformat() if c.created_at else None,
        "updated_at": c.updated_at.isoformat() if c.updated_at else None,
    }


async def get_connection(session: AsyncSession, connection_id: str) -> Connection:
    row = await session.get(Connection, connection_id)
    if row is None:
        raise NotFound(f"connection {connection_id} not found")
    return row


async def list_connections(session: AsyncSession) -> list[Connection]:
    return list((await session.scalars(select(Connection).order_by(Connection.created_at))).all())


DEFAULT_SETTING = "default_connection_id"
"""The instance setting naming the connection chats get when they name none (R14.0)."""


async def default_connection(session: AsyncSession) -> Connection:
    """The connection a chat gets when it names none: the `default_connection_id` setting
    when it names a connection that still exists, else the built-in `mock` (R14.0)."""
    connection_id = await get_setting(session, DEFAULT_SETTING)
    if isinstance(connection_id, str):
        row = await session.get(Connection, connection_id)
        if row is not None:
            return row
    return await ensure_mock(session)


async def ensure_mock(session: AsyncSession) -> Connection:
    """A fresh data dir has a ready offline `mock` connection (no key needed)."""
    row = (await session.scalars(select(Connection).where(Connection.kind == "mock"))).first()
    if row is not None:
        return row
    row = Connection(
        name=MOCK_NAME,
        kind="mock",
        model="mock",
        context_size=8192,
        max_tokens=512,
        tokenizer="heuristic",
        params={},
    )
    session.add(row)
    await session.flush()
    return row
