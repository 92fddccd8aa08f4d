"""The one implementation of the hook contract (R3.1-R3.6): order, timeout, abort, permissions,
isolation and host-computed change records, for interceptors, postprocess and stream hooks.

Must not: be bypassed (no stage calls a hook itself) or hold anything global across tours;
every hook runs inside the calling tour's own task, so a slow hook delays only that tour.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any

from evacore.errors import ToolError
from evacore.macros.engine import MacroDef
from evacore.plugins._guard import check_changes, copy_elements, deep_flags, describe_error, guarded
from evacore.plugins.context import CtxBase, HookContext, InterceptorContext, PostprocessContext
from evacore.plugins.manifest import HookSpec, MacroSpec
from evacore.plugins.spec import HOOK_KINDS
from evacore.prompt.changelog import ChangeRecord, ElementChanges, diff_elements

if TYPE_CHECKING:
    from evacore.plugins.manager import PluginManager
    from evacore.plugins.stream import StreamHooks

_log = logging.getLogger(__name__)

BudgetCheck = Callable[[list[dict[str, Any]]], "list[dict[str, Any]] | Awaitable[list[dict[str, Any]]]"]


@dataclass(slots=True)
class HookRecord:
    """What happened to one hook in one tour.

    `outcome` is one of: applied, no_change, rejected, error, timeout, skipped.
    """

    kind: str
    """The hook kind: interceptor, postprocess or stream."""
    plugin: str
    hook: str
    outcome: str
    reason: str | None = None
    duration_ms: float | None = None
    changes: ElementChanges | None = None
    stats: dict[str, Any] | None = None
    """Stream hooks only: deltas seen and modified, rejected writes, latency (ms)."""

    @property
    def key(self) -> str:
        return f"{self.plugin}.{self.hook}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "hook": self.key, "outcome": self.outcome}
        if self.reason:
            out["reason"] = self.reason
        if self.duration_ms is not None:
            out["duration_ms"] = round(self.duration_ms, 3)
        if self.changes:
            out.update(self.changes.to_json())
        if self.stats:
            out["stats"] = dict(self.stats)
        return out

    def to_change_record(self, stage_name: str) -> ChangeRecord:
        return ChangeRecord.from_changes(
            stage_name, f"plugin:{self.key}", self.changes, duration_ms=self.duration_ms,
            outcome=self.outcome, reason=self.reason,
            extra={"stats": self.stats} if self.stats else {},
        )


@dataclass(slots=True)
class InterceptResult:
    messages: list[dict[str, Any]] | None
    """The accepted messages; elements no hook changed are the caller's own dicts. None when
    the caller gave a function that makes them and no hook asked for them (nothing changed)."""
    log: list[HookRecord]
    order: list[str] = field(default_factory=list)
    changed: bool = False
    """True when some hook's changes were applied (the pipeline must recount and re-fit)."""
    budget: ElementChanges | None = None
    """What `budget_check` changed after the last interceptor, if it ran."""


_UNSET: Any = object()


class _Source:
    """The accepted messages of a run, with copies made only when a hook asks for them."""

    __slots__ = ("_accepted", "_flags", "_make", "shared")

    def __init__(self, accepted: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]
                 ) -> None:
        self._make = accepted if callable(accepted) else None
        self._accepted = None if callable(accepted) else accepted
        self._flags: Any = _UNSET
        self.shared: list[dict[str, Any]] | None = None
        """One copy read-only hooks share while it stays unchanged."""

    @property
    def made(self) -> bool:
        return self._accepted is not None

    @property
    def accepted(self) -> list[dict[str, Any]]:
        if self._accepted is None:
            assert self._make is not None
            self._accepted = self._make()
        return self._accepted

    def copy(self) -> list[dict[str, Any]]:
        if self._flags is _UNSET:
            self._flags = deep_flags(self.accepted)
        return copy_elements(self.accepted, self._flags)

    def shared_copy(self) -> list[dict[str, Any]]:
        if self.shared is None:
            self.shared = self.copy()
        return self.shared

    def set(self, accepted: list[dict[str, Any]]) -> None:
        self._accepted, self._flags, self.shared = accepted, _UNSET, None


class Dispatcher:
    """Runs the hooks of the manager's plugins for one tour at a time (no state across tours)."""

    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager

    def order(self, stage: str) -> list[str]:
        """The resolved order of a hook kind: priority ascending, then plugin name, then hook name."""
        return [h.key for h in self.manager.hooks(stage)]

    def _log_order(self, stage: str, order: list[str], base: CtxBase) -> None:
        _log.debug("plugin hook order", extra={"stage": stage, "order": order, "tour_id": base.tour_id})

    def _skip_reason(self, h: HookSpec, base: CtxBase) -> str | None:
        reason = self.manager.blocked(h.plugin, h.capabilities)
        if reason is None and base.abort.is_set():
            return "tour aborted"
        return reason

    def _failed(self, h: HookSpec, outcome: str, exc: BaseException | None, base: CtxBase,
                reason: str | None = None) -> str:
        if outcome == "timeout":
            reason = f"timeout after {h.timeout:g}s"
            _log.warning("plugin hook timed out", extra={"plugin": h.plugin, "hook": h.name,
                                                         "tour_id": base.tour_id})
        elif outcome == "error":
            reason = describe_error(exc)
            _log.warning("plugin hook failed: %s", reason, extra={"plugin": h.plugin, "hook": h.name,
                         "tour_id": base.tour_id},
                         exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None)
        else:
            _log.warning("plugin hook rejected: %s", reason, extra={"plugin": h.plugin, "hook": h.name,
                                                                    "tour_id": base.tour_id})
        self.manager.record_failure(h.plugin, h.name, outcome, reason or outcome)
        return reason or outcome

    def _succeeded(self, h: HookSpec) -> None:
        st = self.manager.states[h.plugin]
        if st.consecutive_failures:
            st.consecutive_failures, st.breaker_until = 0, 0.0

    # stage 8 ------------------------------------------------------------------------------
    async def run_interceptors(
        self, messages: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]], *,
        ctx_base: CtxBase, budget_check: BudgetCheck | None = None,
    ) -> InterceptResult:
        """Pass the messages through every interceptor in order; each gets its own copy.
        `messages` may be a function that makes them: it is called only when a hook asks for
        them (a hook with nothing to do, such as regex scripts with none set, costs no copy
        of the prompt).

        A hook's changes are kept only if it finished in time, without error, holds
        `prompt:write`, and left protected elements alone; kept changes feed the next hook.
        If any were kept and `budget_check` is given, it is called once at the end with the
        accepted list (new or changed elements carry `tokens: None`) and must return the
        fitted list; its changes are recorded as actor `stage:budget`.
        """
        hooks = self.manager.hooks("interceptor")
        if not hooks:
            return InterceptResult(messages() if callable(messages) else list(messages), [])
        t_start = perf_counter()
        kind = "interceptor"
        order = [h.key for h in hooks]
        self._log_order(kind, order, ctx_base)
        states = self.manager.states
        src = _Source(messages if callable(messages) else list(messages))
        counters: dict[str, list[int]] = {}
        log: list[HookRecord] = []
        changed = False
        for h in hooks:
            reason = self._skip_reason(h, ctx_base)
            if reason is not None:
                log.append(HookRecord(kind, h.plugin, h.name, "skipped", reason))
                continue
            ctx = InterceptorContext(ctx_base, h.plugin, h.name, states[h.plugin].settings_value,
                                     src.copy if h.writes else src.shared_copy)
            outcome, exc, ms = await guarded(h.fn, ctx, h.timeout)
            after = ctx._taken()
            if outcome != "ok":
                if after is not None and after is src.shared:
                    src.shared = None
                log.append(HookRecord(kind, h.plugin, h.name, outcome,
                                      self._failed(h, outcome, exc, ctx_base), ms))
                continue
            if after is None or (after.__class__ is list and after == src.accepted):
                self._succeeded(h)
                log.append(HookRecord(kind, h.plugin, h.name, "no_change", None, ms))
                continue
            if after is src.shared:
                src.shared = None
            if not h.writes:
                reason = self._failed(h, "rejected", None, ctx_base, "read-only hook changed the prompt")
                log.append(HookRecord(kind, h.plugin, h.name, "rejected", reason, ms))
                continue
            verdict = check_changes(src.accepted, after, h.plugin, counters.setdefault(h.plugin, [0]),
                                    ctx_base.editable_protected)
            if isinstance(verdict, str):
                log.append(HookRecord(kind, h.plugin, h.name, "rejected",
                                      self._failed(h, "rejected", None, ctx_base, verdict), ms))
                continue
            accepted, changes = verdict
            src.set(accepted)
            changed = True
            self._succeeded(h)
            log.append(HookRecord(kind, h.plugin, h.name, "applied" if changes else "no_change", None,
                                  ms, changes or None))
        accepted = src.accepted if src.made else None
        budget: ElementChanges | None = None
        if changed and budget_check is not None:
            assert accepted is not None  # a change made them
            fitted = budget_check(accepted)
            if inspect.isawaitable(fitted):
                fitted = await fitted
            budget = diff_elements(accepted, fitted)
            accepted = list(fitted)
        result = InterceptResult(accepted, log, order, changed, budget)
        if ctx_base.changelog is not None:
            self._record(HOOK_KINDS[kind].stage_name, log, order, ctx_base, t_start, budget)
        return result

    def _record(self, stage_name: str, log: list[HookRecord], order: list[str], base: CtxBase,
                t_start: float, budget: ElementChanges | None = None) -> None:
        changelog = base.changelog
        assert changelog is not None
        skipped = [{"hook": r.key, "reason": f"{r.outcome}: {r.reason}" if r.outcome != "skipped"
                    else (r.reason or "")} for r in log if r.outcome not in ("applied", "no_change")]
        changelog.append(ChangeRecord(stage_name, "stage", skipped=skipped, order=order,
                                      duration_ms=(perf_counter() - t_start) * 1000))
        for r in log:
            if r.outcome != "skipped":
                changelog.append(r.to_change_record(stage_name))
        if budget:
            changelog.append(ChangeRecord.from_changes(stage_name, "stage:budget", budget))

    # stage 13 -----------------------------------------------------------------------------
    async def run_postprocess(self, text: str, *, ctx_base: CtxBase) -> tuple[str, list[HookRecord]]:
        """Pass the final answer through every postprocess hook; returns (text, log)."""
        hooks = self.manager.hooks("postprocess")
        if not hooks:
            return text, []
        t_start = perf_counter()
        kind = "postprocess"
        order = [h.key for h in hooks]
        self._log_order(kind, order, ctx_base)
        states = self.manager.states
        log: list[HookRecord] = []
        for h in hooks:
            reason = self._skip_reason(h, ctx_base)
            if reason is not None:
                log.append(HookRecord(kind, h.plugin, h.name, "skipped", reason))
                continue
            ctx = PostprocessContext(ctx_base, h.plugin, h.name, states[h.plugin].settings_value, text)
            outcome, exc, ms = await guarded(h.fn, ctx, h.timeout)
            if outcome != "ok":
                log.append(HookRecord(kind, h.plugin, h.name, outcome,
                                      self._failed(h, outcome, exc, ctx_base), ms))
                continue
            new = ctx.text
            if new == text:
                self._succeeded(h)
                log.append(HookRecord(kind, h.plugin, h.name, "no_change", None, ms))
                continue
            why = ("read-only hook changed the answer" if not h.writes else
                   None if isinstance(new, str) else f"text must be a string, got {type(new).__name__}")
            if why is not None:
                log.append(HookRecord(kind, h.plugin, h.name, "rejected",
                                      self._failed(h, "rejected", None, ctx_base, why), ms))
                continue
            changes = ElementChanges(changed=[{"id": "answer", "before": {"content": text},
                                               "after": {"content": new}}])
            text = new
            self._succeeded(h)
            log.append(HookRecord(kind, h.plugin, h.name, "applied", None, ms, changes))
        if ctx_base.changelog is not None:
            self._record(HOOK_KINDS[kind].stage_name, log, order, ctx_base, t_start)
        return text, log

    def stream_hooks(self, ctx_base: CtxBase) -> StreamHooks:
        """The per-delta hooks of one stream (one object per tour step); see StreamHooks."""
        from evacore.plugins.stream import StreamHooks

        return StreamHooks(self, ctx_base)

    # registrations ------------------------------------------------------------------------
    async def run_tool(self, name: str, args: Mapping[str, Any], *, ctx_base: CtxBase) -> str:
        """Call a plugin tool under the contract; failures raise ToolError (an `error:` result)."""
        spec = self.manager.tools().get(name)
        if spec is None:
            raise ToolError(f"no plugin tool {name!r} is available")
        hook = HookSpec(spec.plugin, spec.name, "tool", 0, frozenset({"tools"}), spec.timeout,
                        spec.fn, False)
        reason = self._skip_reason(hook, ctx_base)
        if reason is not None:
            raise ToolError(f"plugin tool {name!r} not run: {reason}")
        ctx = HookContext(ctx_base, spec.plugin, spec.name, self.manager.states[spec.plugin].settings_value)
        box: list[Any] = []

        async def call(c: HookContext) -> None:
            box.append(await spec.fn(dict(args), c))

        outcome, exc, _ms = await guarded(call, ctx, spec.timeout)
        if outcome != "ok":
            raise ToolError(f"plugin tool {name!r} failed: {self._failed(hook, outcome, exc, ctx_base)}")
        self._succeeded(hook)
        result = box[0] if box else None
        if result is None:
            return ""
        if isinstance(result, str):
            return result
        if isinstance(result, (dict, list)):
            return json.dumps(result, ensure_ascii=False)
        return str(result)

    def macro_definition(self, name: str) -> MacroDef | None:
        """The macro engine's definition of plugin macro `name` as the plugins stand now:
        the first plugin (by name) that is enabled, granted `macros` and defines it; None
        when none does (the macro then stays as written)."""
        spec = next((m for n, m in self.manager.macros().items() if n.lower() == name.lower()),
                    None)
        if spec is None:
            return None
        return MacroDef(spec.name, self._guard_macro(spec), f"plugin macro {spec.name}",
                        max_args=None)

    def macro_functions(self) -> dict[str, Callable[..., str]]:
        """Plugin macros for the macro engine, each guarded: a failing macro stays as written."""
        return {name: self._guard_macro(spec) for name, spec in self.manager.macros().items()}

    def _guard_macro(self, spec: MacroSpec) -> Callable[..., str]:
        manager = self.manager

        def call(env: Any, *args: Any) -> str:
            try:
                result = spec.fn(env, *args)
            except BaseException as exc:  # noqa: BLE001 - a plugin macro never breaks a tour
                _log.warning("plugin macro failed", extra={"plugin": spec.plugin, "macro": spec.name},
                             exc_info=(type(exc), exc, exc.__traceback__))
                manager.record_failure(spec.plugin, f"macro:{spec.name}", "error", describe_error(exc))
                return "{{" + "::".join([spec.name, *map(str, args)]) + "}}"
            return result if isinstance(result, str) else ("" if result is None else str(result))

        return call
