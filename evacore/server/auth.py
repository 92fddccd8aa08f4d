"""Bearer-token authentication and role checks (R8, R8.1).

Must not: take a role from anything but the token's user; never echo or log a token. A
checked token is trusted for a few seconds (store/token_cache.py) until users or tokens change.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from evacore.domain.roles import Identity
from evacore.errors import Forbidden, Unauthorized
from evacore.store.users import identify

__all__ = ["AnyUser", "Identity", "Master", "Trusted", "current_identity"]

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <token>`")


async def current_identity(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("a bearer token is required")
    core = request.app.state.core
    identity = await identify(core.session, core.token_cache, credentials.credentials)
    if identity is None:
        raise Unauthorized("the token is not valid")
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
