"""Connection records (R12.2): CRUD, the built-in `mock` connection, masking of secrets.

`connection_json` shows the API key, the values of secret-looking `params.extra_headers`
and secret query values of `base_url` masked (`…` and the last four characters); a masked
value sent back unchanged in a PATCH keeps the stored secret (`keep_masked_secrets`).

Must not: return or log an API key or any other secret of a connection.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import NotFound
from evacore.redact import is_secret_name, mask, redact_headers, redact_url, redact_value
from evacore.store.settings import get_setting
from evacore.store.tables import Connection

KINDS = ("openai-chat", "openai-text", "anthropic", "kobold", "mock")
POSTPROCESS_MODES = (
    "none", "merge", "semi", "strict", "single", "merge_tools", "semi_tools", "strict_tools",
)
MOCK_NAME = "mock"


def mask_key(key: str | None) -> str | None:
    return mask(key)


def _shown(value: Any) -> str:
    return mask(str(value)) or ""


def shown_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """Params as an answer shows them: secret-looking extra headers masked, and any known
    secret or secret-shaped token elsewhere redacted."""
    out = dict(params or {})
    headers = out.get("extra_headers")
    if isinstance(headers, dict):
        out["extra_headers"] = redact_headers(headers, shown=_shown)
    return redact_value(out)  # type: ignore[no-any-return]


def shown_url(url: str | None) -> str | None:
    return redact_url(url, shown=_shown) if url else url


def _query(url: str) -> list[tuple[str, str, str]]:
    """(name, separator, raw value) of each query part."""
    query = url.partition("?")[2].partition("#")[0]
    out = []
    for part in query.split("&") if query else ():
        name, sep, value = part.partition("=")
        out.append((name, sep, value))
    return out


def _restore_url(new: str | None, old: str | None) -> str | None:
    if not new or not old or "?" not in new:
        return new
    stored = {name: value for name, sep, value in _query(old) if sep}
    base, _, rest = new.partition("?")
    _, hashmark, fragment = rest.partition("#")
    parts = []
    for name, sep, value in _query(new):
        old_value = stored.get(name)
        if sep and old_value is not None and is_secret_name(unquote(name)) \
                and value == _shown(unquote(old_value)):
            value = old_value
        parts.append(name + sep + value)
    return base + "?" + "&".join(parts) + hashmark + fragment


def _restore_headers(new: Any, old: Any) -> Any:
    if not isinstance(new, dict) or not isinstance(old, dict):
        return new
    stored = {str(k).lower(): v for k, v in old.items()}
    out = {}
    for name, value in new.items():
        old_value = stored.get(str(name).lower())
        if old_value is not None and is_secret_name(str(name)) and value == _shown(old_value):
            value = old_value
        out[name] = value
    return out


def keep_masked_secrets(row: Connection, changes: dict[str, Any]) -> dict[str, Any]:
    """A PATCH that sends back a masked value as it was shown keeps the stored secret
    (a client may send the whole record it read)."""
    out = dict(changes)
    if row.api_key and out.get("api_key") == mask(row.api_key):
        out["api_key"] = row.api_key
    if "base_url" in out:
        out["base_url"] = _restore_url(out["base_url"], row.base_url)
    params = out.get("params")
    if isinstance(params, dict) and "extra_headers" in params:
        old = (row.params or {}).get("extra_headers")
        out["params"] = {**params,
                         "extra_headers": _restore_headers(params["extra_headers"], old)}
    return out


def connection_json(c: Connection) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "base_url": shown_url(c.base_url),
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
        "params": shown_params(c.params),
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
