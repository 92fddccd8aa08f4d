"""Stage 14, save: the answer, its steps and metadata in one transaction (R2.14).

Must not: generate anything. Modes decide where the answer goes: normal → a new assistant
message; regenerate/swipe → a new active variant of the target message; continue → a new
variant holding the old text plus the continuation; impersonate/quiet → nothing in the chat.
A partial answer after an abort or failure is saved as a variant marked `aborted`/`failed`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from evacore.domain.ids import utcnow
from evacore.errors import EvacoreError
from evacore.logs import get_logger
from evacore.store import chats as chat_store
from evacore.store import tours as tour_store
from evacore.store.settings import put_setting
from evacore.store.tables import Chat

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)
STORED_MODES = ("normal", "regenerate", "swipe", "continue")


class Save:
    number = 14
    name = "save"

    async def run(self, core: Core, tour: Tour) -> None:
        tour.status = "completed"
        tour.data["save_started"] = time.perf_counter()
        try:
            message_id, variant_id = await _save(core, tour, extras=True)
        except Exception as exc:  # noqa: BLE001 - the answer is kept without the extras
            # A record another package keeps (rule firings …) failed: the answer, the chat's
            # counters and the tour's end still go in, the failure named in diagnostics.
            log.exception("tour.save_extras_failed")
            tour.diagnostics["save_problem"] = f"{type(exc).__name__}: the tour's extra " \
                "records (rule firings, plugin records) were not stored"
            message_id, variant_id = await _save(core, tour, extras=False)
        tour.data["saved"] = (message_id, variant_id)
        tour.events.emit("message", {
            "message_id": message_id, "variant_id": variant_id, "content": tour.answer,
        })
        tour.events.emit("done", {
            "usage": tour.usage, "timings": tour.timings, "finish_reason": tour.finish_reason,
            "tour_id": tour.id,
        })


async def _save(core: Core, tour: Tour, *, extras: bool) -> tuple[str | None, str | None]:
    async with core.session() as s:
        message_id, variant_id = await _store_answer(s, tour, "complete")
        await _store_chat_state(s, tour, committed=True)
        if extras:
            await _store_extras(core, s, tour)
        await tour_store.finish_tour(
            s, tour.id, status="completed", diagnostics=diagnostics_of(tour),
            message_id=message_id, variant_id=variant_id,
        )
    return message_id, variant_id


def storable(text: str) -> str:
    """Model text as a text column takes it: PostgreSQL refuses NUL characters, so each
    becomes U+FFFD (on every backend alike)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


async def _store_answer(s: AsyncSession, tour: Tour, status: str) -> tuple[str | None, str | None]:
    if tour.mode not in STORED_MODES:
        return None, None
    steps = [st.stored() for st in tour.steps if st.tool_calls]
    for st in steps:
        if isinstance(st.get("text"), str):
            st["text"] = storable(st["text"])
    # in continue mode the prefill (the old text) is already at the answer's front
    content = storable(tour.answer)
    chat = await chat_store.get_chat(s, tour.chat_id)
    # Nothing is flushed here: the message, its variant and the chat's counters go out
    # with the transaction's next statement, one write per row.
    fields: dict[str, Any] = dict(
        content=content, steps=steps, finish_reason=tour.finish_reason, status=status,
        usage=tour.usage, timings=dict(tour.timings), model=tour.data.get("model")
        or tour.data["connection"].get("model"), tour_id=tour.id,
        meta={"diagnostics": answer_diagnostics(tour)},
    )
    target_id = tour.data.get("target_message_id")
    if tour.mode in ("regenerate", "swipe", "continue") and target_id:
        message = await chat_store.get_message(s, tour.chat_id, target_id)
    else:
        message = await chat_store.add_message(
            s, chat, role="assistant", name=tour.data["character"].get("name"), flush=False,
        )
    variant = await chat_store.add_variant(s, message, activate=True, flush=False, **fields)
    chat.updated_at = utcnow()
    return message.id, variant.id


async def _store_chat_state(s: AsyncSession, tour: Tour, *, committed: bool) -> None:
    """Variables, engine state and (for a committed answer) the turn counter."""
    chat = await s.get(Chat, tour.chat_id)
    if chat is None:
        return
    chat_data = tour.data["chat"]
    chat.variables = dict(chat_data["variables"])
    chat.state = dict(chat_data["state"])
    if committed and tour.mode in STORED_MODES:
        await chat_store.bump_turn(s, chat.id)  # in the row itself: no update is lost
    env = tour.data.get("macro_env")
    if env is not None and env.global_vars != tour.data.get("global_vars_before"):
        await put_setting(s, "global_variables", dict(env.global_vars))


async def _store_extras(core: Core, s: AsyncSession, tour: Tour) -> None:
    """Records other packages keep per tour (rule firings …), in the same transaction."""
    for writer in core.save_hooks:
        await writer(s, tour)


def diagnostics_of(tour: Tour) -> dict[str, Any]:
    d = dict(tour.diagnostics)
    d["timings"] = dict(tour.timings)
    started = tour.data.get("save_started")
    if started is not None and "save" not in d["timings"]:
        # the record is written inside stage 14: its time so far stands for the stage
        d["timings"]["save"] = round((time.perf_counter() - started) * 1000, 3)
    d["steps"] = [
        {**st.stored(), "index": st.index, "usage": st.usage, "discarded": st.discarded}
        for st in tour.steps
    ]
    d["mode"] = tour.mode
    return d


def answer_diagnostics(tour: Tour) -> dict[str, Any]:
    """What the answer keeps in its metadata: the change log and everything else of the
    diagnostics except the exact provider requests, which stay with the tour
    (`GET /v1/tours/{id}`): they repeat the whole prompt and would make history reads heavy."""
    d = diagnostics_of(tour)
    d.pop("requests", None)
    d["tour_id"] = tour.id
    return d


async def save_failure(core: Core, tour: Tour, status: str, exc: EvacoreError) -> None:
    """Keep what exists after an abort or a failure: the partial answer as a marked variant."""
    partial = tour.data.get("partial")
    step = tour.data.get("step")
    # the prefill (or the text being continued) alone is not an answer: keep it only with
    # the model's own text after it
    text = "".join(partial) if partial and tour.data.get("partial_tokens") else ""
    if tour.data.get("holding") and step is not None and step not in tour.steps and text:
        # held back while a text rule could still discard it: never judged, never shown,
        # so never stored as what the character said
        tour.diagnostics["unjudged_dropped"] = len(text)
        text = ""
    if step is not None and step not in tour.steps and not step.discarded:
        step.text = text
        if step.tool_calls or text:
            tour.steps.append(step)
    tour.answer = text or tour.answer
    tour.status = status
    tour.error = {"code": exc.code, "message": exc.message}
    tour.finish_reason = "abort" if status == "aborted" else "error"
    tour.diagnostics["error"] = tour.error
    message_id = variant_id = None
    # What can be kept, in falling order: everything; the partial answer and the tour's end
    # without the extras; the tour's end alone. A tour is never left `running`.
    for keep in ("all", "answer", "end"):
        try:
            async with core.session() as s:
                if keep != "end" and (tour.answer or any(st.tool_calls for st in tour.steps)):
                    message_id, variant_id = await _store_answer(s, tour, status)
                if keep == "all":
                    await _store_chat_state(s, tour, committed=False)
                    await _store_extras(core, s, tour)
                diagnostics = diagnostics_of(tour) if keep != "end" else {
                    "error": tour.error, "save_problem": "the tour's record could not be stored"}
                await tour_store.finish_tour(
                    s, tour.id, status=status, diagnostics=diagnostics,
                    error=tour.error, message_id=message_id, variant_id=variant_id,
                )
            break
        except Exception:
            message_id = variant_id = None
            log.exception("tour.save_failure_failed", kept=keep)
    tour.data["saved"] = (message_id, variant_id)
