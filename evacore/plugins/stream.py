"""Per-delta stream hooks of one stream (stage 13), under the same contract as every hook.

Must not: wait on anything shared by other tours; a hook over its per-delta timeout, or one
that fails, is switched off for the rest of this stream only, and the delta passes unchanged.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any

from evacore.plugins._guard import guarded
from evacore.plugins.context import CtxBase, StreamContext
from evacore.plugins.manifest import HookSpec
from evacore.plugins.spec import HOOK_KINDS

if TYPE_CHECKING:
    from evacore.plugins.dispatch import Dispatcher, HookRecord


class _Running:
    __slots__ = (
        "deltas",
        "hook",
        "max_ms",
        "modified",
        "outcome",
        "reason",
        "rejected",
        "settings",
        "total_ms",
    )

    def __init__(self, hook: HookSpec, settings: Any) -> None:
        self.hook = hook
        self.settings = settings
        self.deltas = self.modified = self.rejected = 0
        self.total_ms = self.max_ms = 0.0
        self.outcome: str | None = None
        self.reason: str | None = None


class StreamHooks:
    """Feed each delta through `await feed(delta)`; call `finish()` when the stream ends.

    `active` is False when no stream hook may run in this tour: the pipeline can then skip
    `feed` entirely, so streams without hooks pay nothing.
    """

    def __init__(self, dispatcher: Dispatcher, ctx_base: CtxBase) -> None:
        from evacore.plugins.dispatch import HookRecord

        self._dispatcher = dispatcher
        self._base = ctx_base
        self._t_start = perf_counter()
        self._chunks: list[str] = []
        self._joined: str | None = ""
        self._records: list[HookRecord] | None = None
        self._skipped: list[HookRecord] = []
        self._running: list[_Running] = []
        manager = dispatcher.manager
        hooks = manager.hooks("stream")
        self.order = [h.key for h in hooks]
        if hooks:
            dispatcher._log_order("stream", self.order, ctx_base)
        for h in hooks:
            reason = dispatcher._skip_reason(h, ctx_base)
            if reason is not None:
                self._skipped.append(HookRecord("stream", h.plugin, h.name, "skipped", reason))
            else:
                self._running.append(_Running(h, manager.states[h.plugin].settings_value))
        self._active = [r for r in self._running]

    @property
    def active(self) -> bool:
        return bool(self._active)

    def _so_far(self) -> str:
        if self._joined is None:
            self._joined = "".join(self._chunks)
            self._chunks = [self._joined]
        return self._joined

    async def feed(self, delta: str) -> str:
        """Run the active hooks on one delta, in order; returns the delta the client gets."""
        if self._active and not self._base.abort.is_set():
            for r in list(self._active):
                h = r.hook
                ctx = StreamContext(self._base, h.plugin, h.name, r.settings, delta, self._so_far)
                outcome, exc, ms = await guarded(h.fn, ctx, h.timeout)
                r.deltas += 1
                r.total_ms += ms
                r.max_ms = max(r.max_ms, ms)
                if outcome != "ok":
                    r.outcome = outcome
                    r.reason = self._dispatcher._failed(h, outcome, exc, self._base) + \
                        f" (off for the rest of the stream after {r.deltas} deltas)"
                    self._active.remove(r)
                    continue
                new = ctx.delta
                if new is delta or new == delta:
                    continue
                if not h.writes or not isinstance(new, str):
                    r.rejected += 1
                    if r.rejected == 1:
                        why = ("read-only hook changed a delta" if not h.writes
                               else f"delta must be a string, got {type(new).__name__}")
                        r.reason = self._dispatcher._failed(h, "rejected", None, self._base, why)
                    continue
                delta = new
                r.modified += 1
        if delta:
            self._chunks.append(delta)
            self._joined = None
        return delta

    @property
    def text(self) -> str:
        """Everything the client has received so far (after the hooks)."""
        return self._so_far()

    def finish(self) -> list[HookRecord]:
        """One summary record per stream hook (appended once to the change log); idempotent."""
        from evacore.plugins.dispatch import HookRecord

        if self._records is not None:
            return self._records
        records = list(self._skipped)
        for r in self._running:
            h = r.hook
            outcome = r.outcome or ("applied" if r.modified else "rejected" if r.rejected else "no_change")
            stats = {"deltas": r.deltas, "modified": r.modified, "rejected": r.rejected,
                     "total_ms": round(r.total_ms, 3), "max_ms": round(r.max_ms, 3)}
            records.append(HookRecord("stream", h.plugin, h.name, outcome, r.reason, r.total_ms,
                                      None, stats))
        records.sort(key=lambda rec: self.order.index(rec.key))
        self._records = records
        if self._base.changelog is not None and self.order:
            self._dispatcher._record(HOOK_KINDS["stream"].stage_name, records, self.order,
                                     self._base, self._t_start)
        return records
