"""Stage 14, save: the answer, its steps and metadata in one transaction (R2.14).

Must not: generate anything. Modes decide where the answer goes: normal → a new assistant
message; regenerate/swipe → a new active variant of the target message; continue → a new
variant holding the old text plus the continuation; impersonate/quiet → nothing in the chat.
A partial answer after an abort or failure is saved as a variant marked `aborted`/`failed`.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from evacore.domain.ids import new_id
from evacore.errors import EvacoreError, NotFound
from evacore.logs import get_logger
from evacore.redact import redact_json
from evacore.store import request_parts, tour_writes
from evacore.store import tours as tour_store
from evacore.store.lean import transact
from evacore.store.settings import put_setting

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
        except Exception as exc:  # the answer is kept without the extras
            # A record another package keeps (rule firings …) failed: the answer, the chat's
            # counters and the tour's end still go in, the failure named in diagnostics.
            log.exception("tour.save_extras_failed")
            tour.diagnostics["save_problem"] = f"{type(exc).__name__}: the tour's extra " \
                "records (rule firings, plugin records, its request's shared parts) were not stored"
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
    diagnostics, parts = stored_diagnostics(core, tour, shared=extras)
    # the record's redaction and its writes in two passes of the event loop: what became
    # ready meanwhile (other tours' tokens and first steps) waits behind half of it
    await asyncio.sleep(0)

    async def save_in(s: Any) -> tuple[str | None, str | None]:
        message_id, variant_id = await _store_answer(
            s, tour, "complete", diagnostics=diagnostics, chat_state=True, committed=True)
        if extras:
            await _store_extras(core, s, tour)
        await request_parts.store(s, parts)
        await tour_store.finish_tour(
            s, tour.id, status="completed", diagnostics=diagnostics,
            message_id=message_id, variant_id=variant_id, redacted=True,
        )
        return message_id, variant_id

    saved = await transact(core.db, save_in)
    request_parts.committed(core.db, parts)
    return saved


def storable(text: str) -> str:
    """Model text as a text column takes it: PostgreSQL refuses NUL characters, so each
    becomes U+FFFD (on every backend alike)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


async def _store_answer(s: AsyncSession, tour: Tour, status: str, *, diagnostics: dict[str, Any],
                        answer: bool = True, chat_state: bool = False, committed: bool = False
                        ) -> tuple[str | None, str | None]:
    """The answer (`answer`, in a mode that keeps one) and, with `chat_state`, the chat's
    variables, engine state and (`committed`) turn counter: the chat's row is written in one
    statement, taking the answer's position and counting the turn in the row itself, so no
    update of another writer is lost. `diagnostics`: the tour's, redacted."""
    stored = answer and tour.mode in STORED_MODES
    target_id = tour.data.get("target_message_id") \
        if tour.mode in ("regenerate", "swipe", "continue") else None
    chat_data = tour.data["chat"]
    row = await tour_writes.touch_chat(
        s, tour.chat_id, take_position=stored and not target_id,
        count_turn=chat_state and committed and tour.mode in STORED_MODES,
        variables=dict(chat_data["variables"]) if chat_state else None,
        state=dict(chat_data["state"]) if chat_state else None,
    )
    if row is None:
        if stored:
            raise NotFound(f"chat {tour.chat_id} not found")
        return None, None  # the chat went meanwhile: nothing of it to keep
    if chat_state:
        env = tour.data.get("macro_env")
        if env is not None and env.global_vars != tour.data.get("global_vars_before"):
            await put_setting(s, "global_variables", dict(env.global_vars))
    if not stored:
        return None, None
    steps = [st.stored() for st in tour.steps if st.tool_calls]
    for st in steps:
        if isinstance(st.get("text"), str):
            st["text"] = storable(st["text"])
    # in continue mode the prefill (the old text) is already at the answer's front
    content = storable(tour.answer)
    variant_id = new_id()
    if target_id:
        if not await tour_writes.activate_variant(s, tour.chat_id, target_id, variant_id):
            raise NotFound(f"message {target_id} not found in chat {tour.chat_id}")
        message_id = target_id
    else:
        # a new message is inserted already pointing at its variant
        name = tour.data["character"].get("name")
        written = await tour_writes.insert_message(
            s, tour.chat_id, position=int(row[0]) - 1, role="assistant", name=name,
            active_variant_id=variant_id)
        message_id = written["id"]
    await tour_writes.insert_variant(
        s, id=variant_id, message_id=message_id, content=content, steps=steps,
        finish_reason=tour.finish_reason, status=status, usage=tour.usage,
        timings=dict(tour.timings),
        model=tour.data.get("model") or tour.data["connection"].get("model"), tour_id=tour.id,
        meta={"diagnostics": answer_diagnostics(diagnostics, tour.id)}, redacted=True,
    )
    return message_id, variant_id


async def _store_extras(core: Core, s: AsyncSession, tour: Tour) -> None:
    """Records other packages keep per tour (rule firings …) and the tour's own channel
    writes, in the same transaction."""
    for writer in core.save_hooks:
        await writer(s, tour)
    for write in tour.save_hooks:
        await write(s, tour)


def stored_diagnostics(core: Core, tour: Tour, *, shared: bool = True
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tour's diagnostics as its record keeps them: redacted, with `shared` the large
    parts of its provider requests named (`store/request_parts.py`); and the named parts not
    stored yet, for the record's transaction to store (`request_parts.store`)."""
    diagnostics = diagnostics_of(tour)
    parts: dict[str, Any] = {}
    if shared:
        diagnostics, parts = request_parts.named(core.db, diagnostics, tour.chat_id)
    return redact_json(diagnostics), parts


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


def answer_diagnostics(diagnostics: dict[str, Any], tour_id: str) -> dict[str, Any]:
    """What the answer keeps in its metadata: the change log and everything else of the
    diagnostics (`diagnostics_of`) except the exact provider requests, which stay with the
    tour (`GET /v1/tours/{id}`): they repeat the whole prompt and would make history reads
    heavy."""
    d = {k: v for k, v in diagnostics.items() if k != "requests"}
    d["tour_id"] = tour_id
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
    has_answer = bool(tour.answer) or any(st.tool_calls for st in tour.steps)
    for keep in ("all", "answer", "end"):
        parts: dict[str, Any] = {}
        try:
            if keep == "end":
                diagnostics = redact_json({"error": tour.error,
                                           "save_problem": "the tour's record could not be stored"})
            else:  # parts shared only with everything else: stored whole when that failed
                diagnostics, parts = stored_diagnostics(core, tour, shared=keep == "all")
            async with core.session() as s:
                if keep == "all" or (keep == "answer" and has_answer):
                    message_id, variant_id = await _store_answer(
                        s, tour, status, diagnostics=diagnostics, answer=has_answer,
                        chat_state=keep == "all")
                if keep == "all":
                    await _store_extras(core, s, tour)
                await request_parts.store(s, parts)
                await tour_store.finish_tour(
                    s, tour.id, status=status, diagnostics=diagnostics, error=tour.error,
                    message_id=message_id, variant_id=variant_id, redacted=True,
                )
            request_parts.committed(core.db, parts)
            break
        except Exception:
            message_id = variant_id = None
            log.exception("tour.save_failure_failed", kept=keep)
    tour.data["saved"] = (message_id, variant_id)
