"""Users and their bearer tokens; tokens are stored as SHA-256 hashes only (R8.1).

Must not: keep or log a token in clear text; the clear token exists once, at creation.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.domain.roles import ROLES
from evacore.errors import InvalidInput
from evacore.store.tables import ApiToken, User

TOKEN_PREFIX = "evc_"
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
