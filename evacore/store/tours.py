"""Tour records: created running, finished with status and diagnostics, abort requests, and
client op answers relayed to the instance that runs the tour.

Diagnostics and errors pass `evacore.redact` on their way in and out: what is stored or
shown carries no API key, token or secret header value.

Must not: run tours; cross-instance abort is a flag here, and a relayed answer a row, that
the owning instance polls.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.errors import Conflict, NotFound
from evacore.redact import redact_json
from evacore.store import direct
from evacore.store.tables import ClientOpAnswer, Variant
from evacore.store.tables import Tour as TourRow


async def running_elsewhere(session: AsyncSession, chat_id: str, instance_id: str
                            ) -> str | None:
    """The id of a tour of the chat running on another instance, if there is one."""
    return await session.scalar(
        select(TourRow.id).where(TourRow.chat_id == chat_id, TourRow.status == "running",
                                 TourRow.instance_id != instance_id).limit(1))


_FINISH = (update(TourRow.__table__).where(TourRow.__table__.c.id == bindparam("p_id"))
           .values(status=bindparam("p_status"), diagnostics=bindparam("p_diagnostics"),
                   error=bindparam("p_error"), message_id=bindparam("p_message_id"),
                   variant_id=bindparam("p_variant_id"), finished_at=bindparam("p_finished_at")))
"""Built once: a tour's end costs no statement construction."""


async def finish_tour(
    session: AsyncSession,
    tour_id: str,
    *,
    status: str,
    diagnostics: dict[str, Any],
    error: dict[str, Any] | None = None,
    message_id: str | None = None,
    variant_id: str | None = None,
    redacted: bool = False,
) -> None:
    """End the tour's record; `redacted`: the caller passed diagnostics through
    `evacore.redact` already."""
    await direct.execute(session, _FINISH, {
        "p_id": tour_id, "p_status": status,
        "p_diagnostics": diagnostics if redacted else redact_json(diagnostics),
        "p_error": redact_json(error), "p_message_id": message_id,
        "p_variant_id": variant_id, "p_finished_at": utcnow(),
    })


async def get_tour(session: AsyncSession, tour_id: str) -> TourRow:
    row = await session.get(TourRow, tour_id)
    if row is None:
        raise NotFound(f"tour {tour_id} not found")
    return row


async def request_abort(session: AsyncSession, tour_id: str) -> TourRow:
    row = await get_tour(session, tour_id)
    if row.status == "running":
        row.abort_requested = True
    return row


_ABORTS_HERE = (select(TourRow.__table__.c.id)
                .where(TourRow.__table__.c.instance_id == bindparam("p_instance_id"),
                       TourRow.__table__.c.status == "running",
                       TourRow.__table__.c.abort_requested.is_(True)))


async def aborts_requested_here(session: AsyncSession, instance_id: str) -> list[str]:
    """The tours running on this instance that someone asked to abort: one pre-built
    statement on the instance's running tours (an index), read twice a second while
    tours run."""
    return [row[0] for row in await direct.execute(session, _ABORTS_HERE,
                                                   {"p_instance_id": instance_id})]


async def relay_answer(session: AsyncSession, tour_id: str, call_id: str, content: str,
                       is_error: bool) -> None:
    """Leave a client op's answer for the instance running the tour (409 if one is there)."""
    session.add(ClientOpAnswer(tour_id=tour_id, call_id=call_id, content=content,
                               is_error=is_error))
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError:
        raise Conflict(f"client op {call_id} of tour {tour_id} was already answered") from None


async def made_call(session: AsyncSession, row: TourRow, call_id: str) -> bool:
    """Whether an ended tour made this tool call: its stored answer's steps hold it."""
    if row.variant_id is None:
        return False
    steps = await session.scalar(select(Variant.steps).where(Variant.id == row.variant_id))
    return any(isinstance(call, dict) and call.get("id") == call_id
               for step in steps or () if isinstance(step, dict)
               for call in step.get("tool_calls") or ())


async def take_answers(session: AsyncSession, calls: list[tuple[str, str]]
                       ) -> list[ClientOpAnswer]:
    """The relayed answers to these (tour id, call id) pairs. A taken row stays until its
    tour ends (`drop_answers`): a second answer relayed meanwhile meets it and is a 409,
    whichever instance it reaches."""
    if not calls:
        return []
    key = tuple_(ClientOpAnswer.tour_id, ClientOpAnswer.call_id)
    return list((await session.scalars(select(ClientOpAnswer).where(key.in_(calls)))).all())


async def drop_answers(session: AsyncSession, tour_ids: list[str]) -> None:
    """Relayed answers of tours that ended are of no use any more."""
    if tour_ids:
        await session.execute(delete(ClientOpAnswer).where(ClientOpAnswer.tour_id.in_(tour_ids)))


def tour_json(row: TourRow, diagnostics: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tour as the API shows it, redacted; `diagnostics`: the record's as read back
    (`request_parts.resolved`), when the caller has them."""
    return {
        "id": row.id,
        "tour_id": row.id,
        "chat_id": row.chat_id,
        "mode": row.mode,
        "status": row.status,
        "env": row.env or {},
        "message_id": row.message_id,
        "variant_id": row.variant_id,
        "error": redact_json(row.error),
        "diagnostics": redact_json(row.diagnostics or {} if diagnostics is None
                                   else diagnostics),
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }
