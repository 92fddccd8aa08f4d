"""The plugin host of a running core: discovery at start, stored state, and the pipeline's
entry points to the dispatcher (stage 8 interceptors, stage 13 post-processing and streaming).

Several instances on one database share the plugins' state (R14.5): each writes what changed
here and takes, every `SYNC_SECONDS` and before a change through the API, what another one
wrote, so a plugin enabled or set up through one instance acts on every instance's tours.

Must not: implement the hook contract (dispatch.py alone does) or build prompts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter
from sqlalchemy import event, select

from evacore.agent.registry import Tool, ToolContext, ToolRegistry
from evacore.logs import get_logger
from evacore.macros.engine import MacroEngine
from evacore.plugins.context import CtxBase
from evacore.plugins.manager import PluginManager
from evacore.prompt.changelog import ChangeLog
from evacore.store import direct
from evacore.store.lean import transact
from evacore.store.tables import PluginRecord
from evacore.ticks import sleep_to_next

if TYPE_CHECKING:
    from pathlib import Path

    from evacore.pipeline.tour import Tour
    from evacore.store.db import Database

log = get_logger(__name__)

PLUGIN_FAILURES = Counter(
    "evacore_plugin_failures_total", "Plugin hook failures (errors, timeouts, rejections).",
    ["plugin", "hook", "kind"],
)


SYNC_SECONDS = 2.0
"""How often an instance takes the plugin state other instances stored."""
_STATES = select(PluginRecord.__table__.c.name, PluginRecord.__table__.c.state)
"""Built once: every instance reads it every `SYNC_SECONDS`."""


class PluginHost:
    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager
        self._dirty: set[str] = set()
        self._known: dict[str, Any] = manager.state_snapshot()
        """Each plugin's state as this instance last read or wrote it."""
        self._writing: Tally[str] = Tally()
        """Plugins whose state this instance wrote in a transaction not yet ended."""
        self._writes: dict[str, int] = {}
        """How many writes of each plugin's state this instance began."""
        self._sync: asyncio.Task[None] | None = None
        manager.on_change = lambda name, _state: self._dirty.add(name)
        manager.on_failure = self._failed

    async def refresh(self, session: Any) -> None:
        """Take the state another instance stored: every plugin whose stored state is not
        what this instance last read or wrote, unless it has changes of its own not yet
        written."""
        began = dict(self._writes)
        rows = await direct.execute(session, _STATES, {})
        # A row this instance is writing, or wrote while the read ran, may be read as it was
        # before that write: taking it would undo the change (a failure counted meanwhile).
        changed = {name: dict(state or {}) for name, state in rows
                   if name not in self._dirty and not self._writing[name]
                   and self._writes.get(name) == began.get(name)
                   and dict(state or {}) != self._known.get(name)}
        if changed:
            self._known.update(changed)
            for warning in self.manager.load_state(changed):
                log.warning("plugins.state", warning=warning)

    def start_sync(self, db: Database, every: float = SYNC_SECONDS) -> None:
        async def run() -> None:
            while True:
                await sleep_to_next(every)
                try:
                    await transact(db, self.refresh)  # lean on SQLite
                except Exception:  # a database hiccup: the next round tries
                    log.warning("plugins.sync_failed", exc_info=True)

        if self._sync is None:
            self._sync = asyncio.get_running_loop().create_task(run(), name="plugins-sync")

    async def aclose(self) -> None:
        if self._sync is not None:
            self._sync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync
            self._sync = None

    def _failed(self, plugin: str, hook: str, kind: str) -> None:
        PLUGIN_FAILURES.labels(plugin, hook, kind).inc()
        self._dirty.add(plugin)

    @property
    def dispatcher(self) -> Any:
        return self.manager.dispatcher

    def ctx_base(self, tour: Tour) -> CtxBase:
        base = tour.data.get("plugin_ctx")
        if base is None:
            input_ids = frozenset(el.id for el in tour.prompt if el.kind == "input")
            base = CtxBase(
                tour_id=tour.id, chat_id=tour.chat_id, env=dict(tour.env), abort=tour.abort,
                expand_macros=tour.data.get("expand"), editable_protected=input_ids,
                changelog=ChangeLog(),
            )
            tour.data["plugin_ctx"] = base
        return base

    async def postprocess(self, tour: Tour, text: str) -> str:
        if not self.manager.hooks("postprocess"):
            return text
        text, records = await self.dispatcher.run_postprocess(text, ctx_base=self.ctx_base(tour))
        note_records(tour, "postprocess", records)
        return text

    def stream_hooks(self, tour: Tour) -> Any:
        if not self.manager.hooks("stream"):
            return None
        hooks = self.dispatcher.stream_hooks(self.ctx_base(tour))
        return hooks if hooks.active else None

    async def persist(self, session: Any, names: set[str] | None = None) -> None:
        """Write the state of changed plugins (enabled, permissions, settings, failures)."""
        snapshot = self.manager.state_snapshot()
        names = {n for n in (self._dirty if names is None else names) if n in snapshot}
        self._dirty -= names
        if not names:
            return
        self._track(session, names)
        for name in names:
            row = await session.get(PluginRecord, name)
            if row is None:
                session.add(PluginRecord(name=name, state=snapshot[name]))
            else:
                row.state = snapshot[name]
            self._known[name] = dict(snapshot[name])

    def _track(self, session: Any, names: set[str]) -> None:
        """Count `names` as being written until `session`'s transaction ends; if it ends
        without a commit, they are changed again (the next save writes them)."""
        for name in names:
            self._writing[name] += 1
            self._writes[name] = self._writes.get(name, 0) + 1
        sync = getattr(session, "sync_session", session)
        outcome = {"committed": False, "open": True}

        def committed(_session: Any) -> None:
            outcome["committed"] = True

        def ended(_session: Any, transaction: Any) -> None:
            if transaction.parent is not None or not outcome["open"]:
                return
            outcome["open"] = False
            self._writing.subtract(names)
            if not outcome["committed"]:
                self._dirty |= names

        event.listen(sync, "after_commit", committed)
        event.listen(sync, "after_transaction_end", ended)

    async def save_hook(self, session: Any, tour: Tour) -> None:
        if self._dirty:
            await self.persist(session)

    def register_extensions(self, macros: MacroEngine, registry: ToolRegistry) -> None:
        """Plugin macros into the macro engine (looked up at each call, so a plugin's macros
        follow its state live: enabled and granted `macros`, or left as written), plugin
        tools into the tool registry (a name already taken keeps its tool)."""
        host = self
        macros.add_resolver(host.dispatcher.macro_definition)
        for name, spec in host.manager.tools().items():

            async def handler(args: dict[str, Any], ctx: ToolContext, _name: str = name) -> str:
                tour = ctx.services.get("tour")
                base = host.ctx_base(tour) if tour is not None else CtxBase(
                    tour_id=ctx.tour_id, chat_id=ctx.chat_id, env={f: True for f in ctx.env},
                    abort=ctx.abort)
                return await host.dispatcher.run_tool(_name, args, ctx_base=base)

            if registry.get(name) is None:
                registry.register(Tool(
                    name=name, description=spec.description, parameters=spec.parameters,
                    handler=handler, roles=frozenset({"master", "trusted", "guest"}),
                    kind="plugin", timeout=None,
                ))


def note_records(tour: Tour, stage: str, records: list[Any]) -> None:
    """Hook records (applied, skipped with the reason, failed) into the tour's diagnostics:
    `plugins` (one entry per hook) and the change log `changes` (the dispatcher's records,
    shaped as docs/plugins.md shows them)."""
    flush_changelog(tour)
    if not records:
        return
    out = tour.diagnostics.setdefault("plugins", [])
    for r in records:
        entry = {"stage": stage, "plugin": r.plugin, **r.to_dict()}
        if r.changes:
            entry["changes"] = r.changes.to_json()
        out.append(entry)


def flush_changelog(tour: Tour, *extra: dict[str, Any]) -> None:
    """Move the dispatcher's change records of this tour (and `extra` ones) into
    `diagnostics["changes"]`, in order."""
    base = tour.data.get("plugin_ctx")
    out = tour.diagnostics.setdefault("changes", [])
    if base is not None and base.changelog is not None and base.changelog.records:
        out.extend(base.changelog.to_json())
        base.changelog.records.clear()
    out.extend(extra)


async def load_plugins(db: Database, plugins_dir: Path) -> PluginManager:
    """Discover the plugins in `plugins_dir` and restore their stored state."""
    manager = PluginManager.from_discovery(plugins_dir)
    async with db.session() as s:
        rows = (await s.scalars(select(PluginRecord))).all()
    for warning in manager.load_state({r.name: r.state or {} for r in rows}):
        log.warning("plugins.state", warning=warning)
    return manager
