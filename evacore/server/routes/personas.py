"""`/v1/personas` (R8.2, §13 "Personas"): who the user plays; `{{user}}` is the chat's persona
name. Create, list, read, edit, delete.

Must not: choose a chat's persona (PATCH /v1/chats does). Any user manages their own
personas; the master sees and manages all. Deleting a persona leaves its chats on `User`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import NotFound
from evacore.server.auth import AnyUser, Identity
from evacore.server.deps import SessionDep
from evacore.store.tables import Persona

router = APIRouter(tags=["personas"])


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


Name = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_no_nul)]
Description = Annotated[str, Field(max_length=100_000), AfterValidator(_no_nul)]


class PersonaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name
    description: Description = ""


class PersonaPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    description: Description | None = None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def persona_json(p: Persona) -> dict[str, Any]:
    return {"id": p.id, "name": p.name, "description": p.description, "user_id": p.user_id,
            "created_at": _iso(p.created_at), "updated_at": _iso(p.updated_at)}


async def _owned(session: AsyncSession, persona_id: str, who: Identity) -> Persona:
    p = await session.get(Persona, persona_id)
    if p is None or (not who.is_master and p.user_id != who.user_id):
        raise NotFound(f"persona {persona_id} not found")
    return p


@router.post("/personas", status_code=201)
async def create_persona(body: PersonaIn, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    p = Persona(name=body.name, description=body.description, user_id=who.user_id)
    session.add(p)
    await session.flush()
    return persona_json(p)


@router.get("/personas")
async def list_personas(
    who: AnyUser, session: SessionDep, limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict[str, Any]:
    stmt = select(Persona)
    count = select(func.count()).select_from(Persona)
    if not who.is_master:
        stmt = stmt.where(Persona.user_id == who.user_id)
        count = count.where(Persona.user_id == who.user_id)
    rows = await session.scalars(stmt.order_by(Persona.name, Persona.id)
                                 .offset(offset).limit(limit))
    return {"personas": [persona_json(p) for p in rows.all()],
            "total": int(await session.scalar(count) or 0)}


@router.get("/personas/{persona_id}")
async def get_persona(persona_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    return persona_json(await _owned(session, persona_id, who))


@router.patch("/personas/{persona_id}")
async def patch_persona(persona_id: str, body: PersonaPatch, who: AnyUser,
                        session: SessionDep) -> dict[str, Any]:
    p = await _owned(session, persona_id, who)
    if body.name is not None:
        p.name = body.name
    if body.description is not None:
        p.description = body.description
    await session.flush()
    return persona_json(p)


@router.delete("/personas/{persona_id}", status_code=204)
async def delete_persona(persona_id: str, who: AnyUser, session: SessionDep) -> Response:
    p = await _owned(session, persona_id, who)
    await session.delete(p)
    return Response(status_code=204)
