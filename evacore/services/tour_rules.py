"""The rules of running tours: the compiled rule set this instance shares, kept current without
a database round trip on the way to the first delta (R6.7), each tour's `TourRules`, and the
firing records written with the tour (R6.11).

Must not: judge answers (the engine does) or change rules (services/rules.py does, and tells this
module through `note_change`). Freshness: a change made through this instance is seen by the
next tour; one made on another instance within FRESH_SECONDS (a version check, count and newest
`updated_at`, runs at tour start when the cache is older, and in the background as it ages).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import event

from evacore.rules import RepeatState, Rule, RuleSet, TourRules, stat_row
from evacore.store import rules as store
from evacore.store.lean import LeanSession, transact
from evacore.store.tables import Chat

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.pipeline.tour import Tour
    from evacore.store.db import Database

_log = structlog.get_logger("evacore.rules")
FRESH_SECONDS = 1.0
STATE_KEY = "stream_rules"
"""The chat's engine state (`chats.state`) keeps {"last_fired": {rule: turn}} under this key:
the repeat state, mirrored from `stream_rule_stat`, so a tour reads it with the chat."""
_LIVE: weakref.WeakSet[RulesService] = weakref.WeakSet()


def note_change(session: AsyncSession) -> None:
    """Rules were written in `session`: this instance's next tour checks the version (now, and
    again once the transaction commits)."""
    services = [svc for svc in _LIVE if svc.db.engine is session.bind]
    if not services:
        return
    for svc in services:
        svc.mark_dirty()

    def committed(_: Any) -> None:
        for svc in services:
            svc.mark_dirty()

    event.listen(session.sync_session, "after_commit", committed, once=True)


class _TourLog:
    """Forwards the engine's log lines and keeps each firing in the tour's diagnostics."""

    def __init__(self, fired: list[dict[str, Any]]) -> None:
        self._fired = fired

    def info(self, event_name: str, **fields: Any) -> None:
        self._fired.append({"event": event_name, **fields})
        _log.info(event_name, **fields)

    def warning(self, event_name: str, **fields: Any) -> None:
        _log.warning(event_name, **fields)


class RulesService:
    """The compiled rules shared by this instance's tours, rebuilt when the stored rules change."""

    fresh_seconds: float = FRESH_SECONDS

    def __init__(self, db: Database) -> None:
        self.db = db
        self._version: tuple[int, str | None] | None = None
        self._ruleset = RuleSet(())
        self._checked = float("-inf")
        self._dirty = True
        self._task: asyncio.Task[None] | None = None
        _LIVE.add(self)

    def mark_dirty(self) -> None:
        self._dirty = True

    def _age(self) -> float:
        return time.monotonic() - self._checked

    def _fresh(self) -> bool:
        return not self._dirty and self._age() < self.fresh_seconds

    async def ruleset(self, session: AsyncSession) -> RuleSet:
        """The current rule set, checked against the database now."""
        await self._check(session)
        return self._ruleset

    async def _check(self, session: AsyncSession, version: tuple[int, str | None] | None = None
                     ) -> bool:
        """Compare the stored rules' version (given, or queried) with the cache; rebuild the
        compiled set when it moved. True if it was rebuilt."""
        self._dirty = False  # a change committing meanwhile marks it again
        if version is None:
            version = await store.rules_version(session)
        self._checked = time.monotonic()
        if version == self._version:
            return False
        rows = await store.read_rules(session)
        for bad in rows:
            if isinstance(bad, store.BadRow):
                _log.warning("stream rule skipped", rule=bad.name, reason=bad.reason)
        self._ruleset = RuleSet.compile(r for r in rows if isinstance(r, Rule))
        self._version = version
        return True

    async def load_for_tour(self, tour: Tour) -> TourRules | None:
        """The tour's rules: its env (after overrides), this chat's repeat state, its turn. With
        a fresh cache and the repeat state in the chat's engine state, no query at all."""
        last = _stored_repeat(tour)
        try:
            if not self._fresh() or last is None:
                last = await self._load(tour, last)
            elif self._age() > self.fresh_seconds / 2:
                self._refresh_in_background()
        except Exception:  # noqa: BLE001 - a tour goes on without rules rather than fail
            _log.exception("stream rules could not be loaded; the tour runs without them")
            return None
        ruleset = self._ruleset
        chat = tour.data.get("chat") or {}
        state = chat.get("state")
        if isinstance(state, dict):
            state[STATE_KEY] = {"last_fired": dict(last)}  # saved with the chat in stage 14
        fired: list[dict[str, Any]] = []
        rules = TourRules(
            ruleset, tour.env, RepeatState(dict(last)), int(chat.get("turn") or 0),
            log=_TourLog(fired), log_fields={"chat_id": tour.chat_id, "tour_id": tour.id},
        )
        tour.diagnostics["rules"] = {
            "loaded": ruleset.names,
            "skipped": [{"rule": n, "reason": why} for n, why in ruleset.skipped],
            "armed": [r.name for r in rules.armed_text_rules()],
            "fired": fired,
        }
        return rules

    async def _load(self, tour: Tour, last: dict[str, int] | None) -> dict[str, int]:
        """One round trip: the version check and, for a chat without a stored repeat state, its
        firing records. On SQLite in a lean session (`store/lean.py`): a chat's first tour
        comes here, and an ordinary session's opening and closing would cost more than the
        statement."""

        async def read(s: AsyncSession | LeanSession) -> list[tuple[str, int]]:
            names = self._ruleset.names if last is None else []
            if self._fresh():
                return await store.repeat_records(s, tour.chat_id, names)
            version, records = await store.version_and_records(s, tour.chat_id, names)
            rebuilt = await self._check(s, version)
            if rebuilt and last is None and set(self._ruleset.names) - set(names):
                records = await store.repeat_records(s, tour.chat_id, self._ruleset.names)
            return records

        records = await transact(self.db, read)
        if last is not None:
            return last
        return RepeatState.from_records(records).last_fired_turn

    def _refresh_in_background(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._background_check(), name="rules-version")

    async def _background_check(self) -> None:
        try:
            await transact(self.db, self._check)
        except Exception:  # noqa: BLE001 - the next tour start checks again
            _log.warning("stream rules version check failed", exc_info=True)

    async def save_firings(self, session: AsyncSession, tour: Tour) -> None:
        """Stage 14 hook, in the tour's transaction: one `stream_rule_stat` row per firing, and
        the firings added to the chat's repeat state."""
        rules = tour.data.get("rules")
        firings = getattr(rules, "firings", None)
        if not firings:
            return
        await store.add_stats(
            session, (stat_row(f, chat_id=tour.chat_id, tour_id=tour.id) for f in firings)
        )
        last = dict(rules.repeat_state.last_fired_turn)
        for firing in firings:
            last[firing.rule] = max(firing.turn, last.get(firing.rule, firing.turn))
        value = {"last_fired": last}
        state = (tour.data.get("chat") or {}).get("state")
        if isinstance(state, dict):
            state[STATE_KEY] = value
        chat = await session.get(Chat, tour.chat_id)
        if chat is not None:
            chat.state = {**(chat.state or {}), STATE_KEY: value}

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _stored_repeat(tour: Tour) -> dict[str, int] | None:
    """The repeat state kept in the chat's engine state, if it is there and well formed."""
    state = (tour.data.get("chat") or {}).get("state")
    value = state.get(STATE_KEY) if isinstance(state, dict) else None
    last = value.get("last_fired") if isinstance(value, dict) else None
    if not isinstance(last, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, int) for k, v in last.items()):
        return None
    return dict(last)
