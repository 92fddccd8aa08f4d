"""Bearer-token authentication and role checks (R8, R8.1).

Must not: take a role from anything but the token's user; never echo or log a token. A
checked token is trusted for a few seconds (store/token_cache.py) until users or tokens change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from evacore.errors import Forbidden, Unauthorized
from evacore.store.users import hash_token, user_for_token

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <token>`")


@dataclass(frozen=True)
class Identity:
    user_id: str
    name: str
    role: str

    @property
    def is_master(self) -> bool:
        return self.role == "master"

    @property
    def is_trusted(self) -> bool:
        return self.role in ("master", "trusted")


async def current_identity(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("a bearer token is required")
    core = request.app.state.core
    known = core.token_cache
    key = hash_token(credentials.credentials)
    hit = known.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    async with core.session() as s:
        await known.baseline(s)
        user = await user_for_token(s, credentials.credentials)
    if user is None:
        known.forget(key)
        raise Unauthorized("the token is not valid")
    identity = Identity(user_id=user.id, name=user.name, role=user.role)
    known.put(key, identity)
    return identity


async def master_identity(identity: Annotated[Identity, Depends(current_identity)]) -> Identity:
    if not identity.is_master:
        raise Forbidden("this endpoint is for the master only")
    return identity


async def trusted_identity(identity: Annotated[Identity, Depends(current_identity)]) -> Identity:
    if not identity.is_trusted:
        raise Forbidden("this endpoint is for trusted users only")
    return identity


AnyUser = Annotated[Identity, Depends(current_identity)]
Master = Annotated[Identity, Depends(master_identity)]
Trusted = Annotated[Identity, Depends(trusted_identity)]
