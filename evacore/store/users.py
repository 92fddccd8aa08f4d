"""Users and their bearer tokens; tokens are stored as SHA-256 hashes only (R8.1).

Must not: keep or log a token in clear text; the clear token exists once, at creation.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.domain.roles import ROLES, Identity
from evacore.errors import Conflict, InvalidInput, NotFound
from evacore.store.settings import get_setting, put_setting
from evacore.store.tables import ApiToken, User
from evacore.store.token_cache import TokenCache, bump_epoch

TOKEN_PREFIX = "evc_"
CONFIGURED_KEY = "master_token_hash"
"""The hash of the token last configured by `EVACORE_MASTER_TOKEN` (retired when it changes)."""
TOUCH_EVERY_SECONDS = 60
_last_touch: dict[str, Any] = {}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


async def create_user(session: AsyncSession, name: str, role: str) -> tuple[User, str]:
    """A new user with one token; returns the user and the clear token (shown once)."""
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}")
    user = User(name=name, role=role)
    session.add(user)
    await session.flush()
    token = await add_token(session, user.id)
    return user, token


async def add_token(session: AsyncSession, user_id: str, token: str | None = None) -> str:
    token = token or new_token()
    session.add(ApiToken(user_id=user_id, token_hash=hash_token(token)))
    await session.flush()
    return token


async def user_for_token(session: AsyncSession, token: str) -> User | None:
    row = (
        await session.execute(
            select(User, ApiToken.id)
            .join(ApiToken, ApiToken.user_id == User.id)
            .where(ApiToken.token_hash == hash_token(token))
        )
    ).first()
    if row is None:
        return None
    now = utcnow()
    last = _last_touch.get(row[1])
    if last is None or (now - last).total_seconds() > TOUCH_EVERY_SECONDS:
        # At most one write per token per minute: reads must not contend for the write lock.
        _last_touch[row[1]] = now
        await session.execute(
            update(ApiToken).where(ApiToken.id == row[1]).values(last_used_at=now)
        )
    return row[0]


async def identify(
    session: Callable[[], AbstractAsyncContextManager[AsyncSession]],
    known: TokenCache,
    token: str,
) -> Identity | None:
    """The identity a bearer token stands for, or None (every channel's check). `known`
    trusts a checked token for a few seconds, until users or tokens change."""
    key = hash_token(token)
    hit = known.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    async with session() as s:
        await known.baseline(s)
        user = await user_for_token(s, token)
    if user is None:
        known.forget(key)
        return None
    identity = Identity(user_id=user.id, name=user.name, role=user.role)
    known.put(key, identity)
    return identity


async def list_users(session: AsyncSession) -> list[User]:
    return list((await session.scalars(select(User).order_by(User.created_at))).all())


async def ensure_master(session: AsyncSession, master_token: str | None) -> str | None:
    """Bootstrap (R8.1): with a configured token, make sure it maps to a master user.

    Without one, create a master and a token on first start and return the clear token,
    which the caller prints once. Returns None when nothing new was created.
    """
    master = (
        await session.scalars(select(User).where(User.role == "master").order_by(User.created_at))
    ).first()
    if master_token:
        await _retire_configured(session, hash_token(master_token))
        if await user_for_token(session, master_token) is not None:
            return None
        if master is None:
            master = User(name="master", role="master")
            session.add(master)
            await session.flush()
        await add_token(session, master.id, master_token)
        return None
    if master is not None:
        return None
    _, token = await create_user(session, "master", "master")
    return token


async def _retire_configured(session: AsyncSession, configured: str) -> None:
    """A changed `EVACORE_MASTER_TOKEN` retires the token configured before it."""
    before = await get_setting(session, CONFIGURED_KEY)
    if before == configured:
        return
    if isinstance(before, str):
        await session.execute(delete(ApiToken).where(ApiToken.token_hash == before))
        await bump_epoch(session)
    await put_setting(session, CONFIGURED_KEY, configured)


async def get_user(session: AsyncSession, user_id: str) -> User:
    user = await session.get(User, user_id)
    if user is None:
        raise NotFound(f"user {user_id} not found")
    return user


async def _masters(session: AsyncSession) -> int:
    return int(await session.scalar(
        select(func.count()).select_from(User).where(User.role == "master")) or 0)


async def set_role(session: AsyncSession, user_id: str, role: str) -> User:
    """Change a user's role; the last master cannot stop being one (409)."""
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}")
    user = await get_user(session, user_id)
    if user.role == "master" and role != "master" and await _masters(session) <= 1:
        raise Conflict("the last master cannot change role; make another master first")
    user.role = role
    await bump_epoch(session)
    return user


async def delete_user(session: AsyncSession, user_id: str) -> None:
    """Delete a user and every token of theirs (what they stored stays, for the master)."""
    user = await get_user(session, user_id)
    if user.role == "master" and await _masters(session) <= 1:
        raise Conflict("the last master cannot be deleted")
    await session.execute(delete(ApiToken).where(ApiToken.user_id == user_id))
    await session.delete(user)
    await bump_epoch(session)


async def list_tokens(session: AsyncSession, user_id: str) -> list[ApiToken]:
    await get_user(session, user_id)
    return list((await session.scalars(
        select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.created_at)
    )).all())


async def new_user_token(session: AsyncSession, user_id: str) -> tuple[ApiToken, str]:
    """Another token for a user; the clear token is returned once."""
    await get_user(session, user_id)
    token = new_token()
    row = ApiToken(user_id=user_id, token_hash=hash_token(token))
    session.add(row)
    await session.flush()
    return row, token


async def revoke_token(session: AsyncSession, user_id: str, token_id: str) -> None:
    """Revoke one token: refused on every instance within a second."""
    row = await session.get(ApiToken, token_id)
    if row is None or row.user_id != user_id:
        raise NotFound(f"token {token_id} of user {user_id} not found")
    await session.delete(row)
    await bump_epoch(session)


async def revoke_by_token(session: AsyncSession, token: str) -> User:
    """Revoke a token given in clear (the CLI's `evacore token revoke`)."""
    row = await session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(token)))
    if row is None:
        raise NotFound("no such token")
    user = await get_user(session, row.user_id)
    await session.delete(row)
    await bump_epoch(session)
    return user


def token_json(row: ApiToken) -> dict[str, Any]:
    return {
        "id": row.id,
        "user_id": row.user_id,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
    }
