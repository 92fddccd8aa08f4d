"""`/v1/tours/{id}` (R8.5): status and diagnostics, abort, and client-op results (R9.2).

Must not: run tours. A tour is visible to the master and to the user who started it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field, StrictBool

from evacore.errors import Conflict, NotFound
from evacore.server.auth import AnyUser
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import request_parts
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
    out = repo.tour_json(row, await request_parts.resolved(session, row.diagnostics or {}))
    running = core.tours.running.get(tour_id)
    if running is not None and row.status == "running":
        tour = running[0]
        out["diagnostics"] = {**tour.diagnostics, "timings": dict(tour.timings)}
    return out


@router.post("/tours/{tour_id}/abort")
async def abort_tour(tour_id: str, who: AnyUser, core: CoreDep) -> dict[str, Any]:
    async with core.session() as s:
        await _visible(s, tour_id, who)
    status = await core.tours.abort(tour_id, "aborted by request")
    return {"tour_id": tour_id, "status": status}


class ClientOpResult(BaseModel):
    content: str = Field(default="", max_length=10_000_000)
    error: StrictBool = False


@router.post("/tours/{tour_id}/client-ops/{call_id}")
async def client_op_result(tour_id: str, call_id: str, body: ClientOpResult, who: AnyUser,
                           core: CoreDep) -> dict[str, Any]:
    """The client's answer to a `client_op` call: accepted once (200); a call that was
    already answered or timed out gets 409; a call the tour never sent gets 404. A tour
    running on another instance gets the answer through the database within half a second
    (`relayed: true`; an answer to a call it never sent is dropped there)."""
    async with core.session() as s:
        row = await _visible(s, tour_id, who)
        broker = core.client_ops
        if broker.resolve(tour_id, call_id, body.content, body.error):
            return {"tour_id": tour_id, "call_id": call_id, "accepted": True}
        if broker.known(tour_id, call_id):
            raise Conflict(f"client op {call_id} of tour {tour_id} was already answered or "
                           "timed out")
        if row.status == "running" and row.instance_id != core.instance_id:
            await repo.relay_answer(s, tour_id, call_id, body.content, body.error)
            return {"tour_id": tour_id, "call_id": call_id, "accepted": True, "relayed": True}
        if row.status != "running" and await repo.made_call(s, row, call_id):
            # it ended on another instance, this call answered there (or timed out)
            raise Conflict(f"client op {call_id} of tour {tour_id} was already answered or "
                           "timed out")
    raise NotFound(f"tour {tour_id} sent no client op {call_id}")
