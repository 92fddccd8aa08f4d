"""Bearer-token authentication and role checks (R8, R8.1).

Must not: take a role from anything but the token's user; never echo or log a token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from evacore.errors import Forbidden, Unauthorized
from evacore.store.users import hash_token, user_for_token

REMEMBER_SECONDS = 5.0
"""How long a checked token is taken on trust without reading the database again."""
_REMEMBER_AT_MOST = 4096

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
    known = checked_tokens(core)
    key = hash_token(credentials.credentials)
    now = time.monotonic()
    hit = known.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    async with core.session() as s:
        user = await user_for_token(s, credentials.credentials)
    if user is None:
        known.pop(key, None)
        raise Unauthorized("the token is not valid")
    identity = Identity(user_id=user.id, name=user.name, role=user.role)
    if len(known) >= _REMEMBER_AT_MOST:
        known.clear()
    known[key] = (now + REMEMBER_SECONDS, identity)
    return identity


def checked_tokens(core: Any) -> dict[str, tuple[float, Identity]]:
    """This core's recently checked tokens (hash -> (trusted until, identity)); clear it
    when a user's role or tokens change so the change applies to the next request."""
    return core.token_cache  # type: ignore[no-any-return]


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
