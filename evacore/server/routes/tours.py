"""`/v1/tours/{id}` (R8.5): status and diagnostics, abort, and client-op results (R9.2).

Must not: run tours. A tour is visible to the master and to the user who started it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from evacore.errors import Conflict, NotFound
from evacore.server.auth import AnyUser
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import tours as repo

router = APIRouter(tags=["tours"])


async def _visible(session: Any, tour_id: str, who: Any) -> Any:
    row = await repo.get_tour(session, tour_id)
    if not who.is_master and row.user_id != who.user_id:
        raise NotFound(f"tour {tour_id} not found")
    return row


@router.get("/tours/{tour_id}")
async def get_tour(tour_id: str, who: AnyUser, core: CoreDep, session: SessionDep) -> dict[str, Any]:
    row = await _visible(session, tour_id, who)
    out = repo.tour_json(row)
    running = core.services["tours"].running.get(tour_id)
    if running is not None and row.status == "running":
        tour = running[0]
        out["diagnostics"] = {**tour.diagnostics, "timings": dict(tour.timings)}
    return out


@router.post("/tours/{tour_id}/abort")
async def abort_tour(tour_id: str, who: AnyUser, core: CoreDep) -> dict[str, Any]:
    async with core.session() as s:
        await _visible(s, tour_id, who)
    status = await core.services["tours"].abort(tour_id, "aborted by request")
    return {"tour_id": tour_id, "status": status}


class ClientOpResult(BaseModel):
    content: str = Field(default="", max_length=10_000_000)
    error: bool = False


@router.post("/tours/{tour_id}/client-ops/{call_id}")
async def client_op_result(tour_id: str, call_id: str, body: ClientOpResult, who: AnyUser,
                           core: CoreDep) -> dict[str, Any]:
    async with core.session() as s:
        await _visible(s, tour_id, who)
    broker = core.services.get("client_ops")
    if broker is None or not broker.resolve(tour_id, call_id, body.content, body.error):
        raise Conflict(f"no client op {call_id} is waiting in tour {tour_id}")
    return {"tour_id": tour_id, "call_id": call_id, "accepted": True}
