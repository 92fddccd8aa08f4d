"""Remote token counting endpoints (llama.cpp `/tokenize`, KoboldCpp `/api/extra/tokencount`,
Anthropic `/v1/messages/count_tokens`), best effort: any failure answers None.

Must not: raise to the caller or retry; counting is an estimate path, never a tour blocker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import structlog

from evacore.providers.base import Connection

log = structlog.get_logger(__name__)
_MISSING = (404, 405, 501)


async def post_count(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    conn: Connection,
    extract: Callable[[Any], Any],
) -> tuple[int | None, bool]:
    """(count or None, whether the endpoint does not exist on this server)."""
    timeout = httpx.Timeout(conn.timeouts.connect, read=conn.timeouts.first_token)
    try:
        response = await client.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        log.debug("provider.tokenize_failed", kind=conn.kind, error=type(exc).__name__)
        return None, False
    if response.status_code in _MISSING:
        return None, True
    if response.status_code >= 400:
        log.debug("provider.tokenize_failed", kind=conn.kind, status=response.status_code)
        return None, False
    try:
        value = extract(response.json())
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, False
    return (value, False) if isinstance(value, int) and value >= 0 else (None, False)


def _auth(conn: Connection) -> dict[str, str]:
    return {"Authorization": f"Bearer {conn.api_key}"} if conn.api_key else {}


def _llamacpp_count(body: Any) -> Any:
    if isinstance(body.get("tokens"), list):
        return len(body["tokens"])
    return body.get("count")


async def llamacpp_tokenize(
    client: httpx.AsyncClient, url: str, conn: Connection, text: str
) -> tuple[int | None, bool]:
    """`url` is the server's `/tokenize` endpoint."""
    return await post_count(
        client, url, {"content": text}, _auth(conn), conn, _llamacpp_count
    )


async def kobold_tokencount(
    client: httpx.AsyncClient, url: str, conn: Connection, text: str
) -> tuple[int | None, bool]:
    """`url` is the server's `/api/extra/tokencount` endpoint."""
    return await post_count(
        client, url, {"prompt": text}, _auth(conn), conn, lambda body: body.get("value"),
    )


async def anthropic_count(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], conn: Connection, text: str
) -> tuple[int | None, bool]:
    body = {"model": conn.model, "messages": [{"role": "user", "content": text}]}
    return await post_count(
        client, url, body, headers, conn, lambda b: b.get("input_tokens")
    )
