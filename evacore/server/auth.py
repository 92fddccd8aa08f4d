"""Bearer-token authentication and role checks (R8, R8.1), and the gate that authenticates
a request carrying a body before any of the body is read.

Must not: take a role from anything but the token's user; never echo or log a token. A
checked token is trusted for a few seconds (store/token_cache.py) until users or tokens change.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from evacore.domain.roles import Identity
from evacore.errors import Forbidden, Unauthorized
from evacore.server.errors import error_response
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


PUBLIC_PATHS = frozenset({"/v1/health"})
"""Paths under `/v1` that answer without a token."""


class TokenBeforeBody:
    """ASGI middleware: a request to `/v1` that carries a body is authenticated from its
    `Authorization` header before the body is read, so an unknown caller's body is never
    parsed (FastAPI parses a JSON body before it runs the route's dependencies). Paths
    matching `exempt` authenticate before reading by themselves, in their own protocol's
    error shape (the OpenAI facade)."""

    def __init__(self, app: Any, *, exempt: tuple[re.Pattern[str], ...] = ()) -> None:
        self.app = app
        self.exempt = exempt

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and _has_body(scope):
            path = scope.get("path", "")
            if (path.startswith("/v1/") and path not in PUBLIC_PATHS
                    and not any(p.match(path) for p in self.exempt)):
                core = scope["app"].state.core
                token = bearer_token(scope)
                known = None if token is None else await identify(
                    core.session, core.token_cache, token)
                if known is None:
                    message = ("a bearer token is required" if token is None
                               else "the token is not valid")
                    await error_response(401, Unauthorized.code, message)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _has_body(scope: Any) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def bearer_token(scope: Any) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token:
                return token  # exactly as FastAPI's HTTPBearer reads it
    return None
