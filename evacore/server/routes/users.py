"""`/v1/users` (master): create, list, change the role of and delete users; list, create and
revoke their tokens (a clear token is returned once, at creation). Every change is seen by
every instance within a second (store/token_cache.py).

Must not: return a token anywhere but in the creation response.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from evacore.server.auth import AnyUser, Master
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import users as repo

router = APIRouter(tags=["users"])


class UserIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    role: Literal["master", "trusted", "guest"] = "guest"


class UserOut(BaseModel):
    id: str
    name: str
    role: str
    created_at: datetime


class UserCreated(UserOut):
    token: str


@router.post("/users", status_code=201, response_model=UserCreated)
async def create_user(body: UserIn, _: Master, session: SessionDep) -> UserCreated:
    user, token = await repo.create_user(session, body.name, body.role)
    return UserCreated(
        id=user.id, name=user.name, role=user.role, created_at=user.created_at, token=token
    )


@router.get("/users")
async def list_users(_: Master, session: SessionDep) -> dict[str, list[UserOut]]:
    rows = await repo.list_users(session)
    return {"users": [_out(u) for u in rows]}


class UserPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["master", "trusted", "guest"] | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)


def _out(u: Any) -> UserOut:
    return UserOut(id=u.id, name=u.name, role=u.role, created_at=u.created_at)


@router.patch("/users/{user_id}", response_model=UserOut)
async def patch_user(user_id: str, body: UserPatch, _: Master, core: CoreDep,
                     session: SessionDep) -> UserOut:
    """Rename a user or change their role (the last master stays master: 409)."""
    user = await repo.get_user(session, user_id)
    if body.role is not None:
        user = await repo.set_role(session, user_id, body.role)
    if body.name is not None:
        user.name = body.name
    core.token_cache.clear()
    return _out(user)


@router.delete("/users/{user_id}", status_code=204)
async def delete_user(user_id: str, _: Master, core: CoreDep, session: SessionDep) -> Response:
    """Delete a user and revoke their tokens; their chats and cards stay for the master."""
    await repo.delete_user(session, user_id)
    core.token_cache.clear()
    return Response(status_code=204)


@router.get("/users/{user_id}/tokens")
async def list_tokens(user_id: str, _: Master, session: SessionDep) -> dict[str, Any]:
    """The user's tokens: ids and dates, never the tokens themselves."""
    return {"tokens": [repo.token_json(t) for t in await repo.list_tokens(session, user_id)]}


@router.post("/users/{user_id}/tokens", status_code=201)
async def create_token(user_id: str, _: Master, session: SessionDep) -> dict[str, Any]:
    """Another token for the user, shown once in this answer."""
    row, token = await repo.new_user_token(session, user_id)
    return {**repo.token_json(row), "token": token}


@router.delete("/users/{user_id}/tokens/{token_id}", status_code=204)
async def revoke_token(user_id: str, token_id: str, _: Master, core: CoreDep,
                       session: SessionDep) -> Response:
    """Revoke a token: 401 for it on every instance within a second."""
    await repo.revoke_token(session, user_id, token_id)
    core.token_cache.clear()
    return Response(status_code=204)


@router.get("/me", response_model=UserOut)
async def me(identity: AnyUser, session: SessionDep) -> UserOut:
    from evacore.store.tables import User

    user = await session.get(User, identity.user_id)
    assert user is not None
    return UserOut(id=user.id, name=user.name, role=user.role, created_at=user.created_at)
