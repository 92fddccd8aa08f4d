"""`/v1/users` (master): create users with a role (token returned once) and list them.

Must not: return a token anywhere but in the creation response.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from evacore.server.auth import AnyUser, Master
from evacore.server.deps import SessionDep
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
    return {
        "users": [
            UserOut(id=u.id, name=u.name, role=u.role, created_at=u.created_at) for u in rows
        ]
    }


@router.get("/me", response_model=UserOut)
async def me(identity: AnyUser, session: SessionDep) -> UserOut:
    from evacore.store.tables import User

    user = await session.get(User, identity.user_id)
    assert user is not None
    return UserOut(id=user.id, name=user.name, role=user.role, created_at=user.created_at)
