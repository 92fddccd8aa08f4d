"""The loaded plugins and their per-plugin state: enabled, granted permissions, settings, failures.

Must not: touch the database (the host persists `state_snapshot()` and restores it with
`load_state()`, told of changes through `on_change`) or run hooks (dispatch.py does).
Policy: every plugin loads enabled; third-party plugins hold no permissions until the master
grants them, built-in plugins start with the permissions they declare.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evacore.errors import InvalidInput, NotFound
from evacore.plugins.discovery import BrokenPlugin, Discovered, LoadedPlugin, discover
from evacore.plugins.manifest import HookSpec, MacroSpec, Plugin, ToolSpec
from evacore.plugins.spec import CAPABILITIES, HOOK_KINDS

if TYPE_CHECKING:
    from evacore.plugins.dispatch import Dispatcher

_log = logging.getLogger(__name__)

OnChange = Callable[[str, dict[str, Any]], None]
OnFailure = Callable[[str, str, str], None]


@dataclass(slots=True)
class PluginState:
    """What the master decided for one plugin, plus its failure counters."""

    enabled: bool = True
    permissions: frozenset[str] = frozenset()
    settings: dict[str, Any] = field(default_factory=dict)
    failures: int = 0
    last_error: str | None = None
    consecutive_failures: int = 0
    settings_value: Any = None
    """The validated settings (model instance, or the dict without a model) handed to ctx."""
    settings_error: str | None = None
    breaker_until: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The persisted shape."""
        return {"enabled": self.enabled, "permissions": sorted(self.permissions),
                "settings": self.settings, "failures": self.failures, "last_error": self.last_error}


@dataclass(slots=True)
class _Entry:
    item: Discovered
    state: PluginState


class PluginManager:
    """Holds the plugins found by discovery and what the master set for each."""

    def __init__(self, plugins: Iterable[Discovered] = (), *, on_change: OnChange | None = None,
                 on_failure: OnFailure | None = None, breaker_threshold: int = 5,
                 breaker_cooldown: float = 60.0) -> None:
        self.on_change = on_change
        self.on_failure = on_failure
        self.breaker_threshold = breaker_threshold
        self.breaker_cooldown = breaker_cooldown
        self._entries: dict[str, _Entry] = {}
        self.states: dict[str, PluginState] = {}
        """Live state by plugin name (the dispatcher reads it on every tour)."""
        self._hooks: dict[str, tuple[HookSpec, ...]] | None = None
        self._stored: dict[str, dict[str, Any]] = {}
        self._dispatcher: Dispatcher | None = None
        self.rejected: list[BrokenPlugin] = []
        """Plugins that could not take their name (a duplicate); listed, never run."""
        for item in plugins:
            self.add(item)

    @classmethod
    def from_discovery(cls, plugins_dir: Path | None, *, entry_points: bool = True,
                       builtins: bool = True, **kw: Any) -> PluginManager:
        return cls(discover(plugins_dir, entry_points=entry_points, builtins=builtins), **kw)

    # registry -----------------------------------------------------------------------------
    def add(self, item: Discovered | Plugin) -> None:
        """Register a discovered (or directly given) plugin; a taken name makes it broken."""
        if isinstance(item, Plugin):
            item = LoadedPlugin(item.name, item, "direct")
        if item.name in self._entries:
            if isinstance(item, LoadedPlugin):
                item = BrokenPlugin(item.name, f"duplicate plugin name {item.name!r}: already "
                                    f"loaded from {self._entries[item.name].item.origin}", item.origin)
            self.rejected.append(item)
            _log.warning("plugin not loaded: %s", item.error)
            return
        state = PluginState()
        if isinstance(item, LoadedPlugin) and item.builtin:
            state.permissions = item.plugin.capabilities
        self._entries[item.name] = _Entry(item, state)
        self.states[item.name] = state
        self._validate_settings(item.name, state, None)
        if item.name in self._stored:
            self._apply_stored(item.name, self._stored[item.name])
        self._hooks = None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def plugin(self, name: str) -> Plugin:
        item = self._entry(name).item
        if isinstance(item, BrokenPlugin):
            raise NotFound(f"plugin {name!r} is broken: {item.error}")
        return item.plugin

    def state(self, name: str) -> PluginState:
        return self._entry(name).state

    def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(name)
        if entry is None:
            raise NotFound(f"no plugin named {name!r}")
        return entry

    def hooks(self, stage: str) -> tuple[HookSpec, ...]:
        """All loaded hooks of a kind in run order: priority ascending, then plugin, then hook name."""
        if self._hooks is None:
            by: dict[str, list[HookSpec]] = {k: [] for k in HOOK_KINDS}
            for entry in self._entries.values():
                if isinstance(entry.item, LoadedPlugin):
                    for h in entry.item.plugin.hooks:
                        by[h.stage].append(h)
            self._hooks = {k: tuple(sorted(v, key=lambda h: h.sort_key)) for k, v in by.items()}
        return self._hooks[stage]

    @property
    def dispatcher(self) -> Dispatcher:
        if self._dispatcher is None:
            from evacore.plugins.dispatch import Dispatcher

            self._dispatcher = Dispatcher(self)
        return self._dispatcher

    # why a plugin's hooks would not run ---------------------------------------------------
    def blocked(self, name: str, capabilities: frozenset[str]) -> str | None:
        """None when hooks needing `capabilities` may run now, else the reason they are skipped."""
        st = self.states[name]
        if not st.enabled:
            return "plugin disabled"
        if not capabilities <= st.permissions:
            return "permission not granted: " + ", ".join(sorted(capabilities - st.permissions))
        if st.settings_error is not None:
            return f"settings invalid: {st.settings_error}"
        if st.breaker_until and time.monotonic() < st.breaker_until:
            return f"circuit open after {st.consecutive_failures} consecutive failures"
        return None

    def macros(self) -> dict[str, MacroSpec]:
        """Macros of enabled plugins granted `macros`; the first plugin (by name) wins a clash."""
        out: dict[str, MacroSpec] = {}
        for name in self.names():
            item = self._entries[name].item
            if isinstance(item, LoadedPlugin) and self.blocked(name, frozenset({"macros"})) is None:
                for m in item.plugin.macros.values():
                    out.setdefault(m.name, m)
        return out

    def tools(self) -> dict[str, ToolSpec]:
        """Tools of enabled plugins granted `tools`; the first plugin (by name) wins a clash."""
        out: dict[str, ToolSpec] = {}
        for name in self.names():
            item = self._entries[name].item
            if isinstance(item, LoadedPlugin) and self.blocked(name, frozenset({"tools"})) is None:
                for t in item.plugin.tools.values():
                    out.setdefault(t.name, t)
        return out

    # failures -----------------------------------------------------------------------------
    def record_failure(self, name: str, hook: str, kind: str, message: str) -> None:
        """Count a failed hook run (`kind`: error, timeout, rejected) and notify the host."""
        st = self.states[name]
        st.failures += 1
        st.consecutive_failures += 1
        st.last_error = f"{hook}: {kind}: {message}"[:1000]
        if st.consecutive_failures >= self.breaker_threshold:
            st.breaker_until = time.monotonic() + self.breaker_cooldown
        if self.on_failure is not None:
            try:
                self.on_failure(name, hook, kind)
            except Exception:  # noqa: BLE001 - a metrics callback must not break a tour
                _log.exception("plugin failure callback failed")
        self._changed(name)

    # persistence --------------------------------------------------------------------------
    def state_snapshot(self) -> dict[str, dict[str, Any]]:
        """Every plugin's persisted state (also of plugins stored earlier but not loaded now)."""
        out = {k: dict(v) for k, v in self._stored.items()}
        out.update({name: e.state.to_dict() for name, e in self._entries.items()})
        return out

    def load_state(self, snapshot: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Restore persisted state; returns warnings (dropped unknown permissions, bad settings)."""
        warnings: list[str] = []
        for name, data in snapshot.items():
            self._stored[name] = dict(data)
            if name in self._entries:
                warnings += self._apply_stored(name, data)
        return warnings

    def _apply_stored(self, name: str, data: Mapping[str, Any]) -> list[str]:
        warnings: list[str] = []
        st = self._entries[name].state
        st.enabled = bool(data.get("enabled", st.enabled))
        perms = data.get("permissions")
        if isinstance(perms, (list, tuple, set, frozenset)):
            unknown = sorted(str(p) for p in perms if p not in CAPABILITIES)
            if unknown:
                warnings.append(f"plugin {name}: dropped unknown permissions {unknown}")
            st.permissions = frozenset(p for p in perms if p in CAPABILITIES)
        st.failures = int(data.get("failures") or 0)
        st.last_error = data.get("last_error")
        settings = data.get("settings")
        if isinstance(settings, Mapping):
            self._validate_settings(name, st, dict(settings))
            if st.settings_error:
                warnings.append(f"plugin {name}: stored settings invalid: {st.settings_error}")
        for w in warnings:
            _log.warning(w)
        return warnings

    def _validate_settings(self, name: str, st: PluginState, raw: dict[str, Any] | None) -> None:
        item = self._entries[name].item
        if isinstance(item, BrokenPlugin):
            st.settings = raw or {}
            return
        model = item.plugin.settings_model
        if model is None:
            st.settings = dict(raw or {})
            st.settings_value, st.settings_error = MappingProxyType(dict(st.settings)), None
            return
        try:
            value = model.model_validate(raw or {})
        except ValidationError as exc:
            st.settings = raw or {}
            st.settings_value, st.settings_error = None, _validation_message(exc)
            return
        st.settings = value.model_dump(mode="json")
        st.settings_value, st.settings_error = value, None

    # the master's changes -----------------------------------------------------------------
    def update(self, name: str, *, enabled: bool | None = None,
               permissions: Iterable[str] | None = None,
               settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Apply a master's PATCH; settings keys are merged over the current ones, then validated."""
        entry = self._entry(name)
        st = entry.state
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidInput("enabled must be true or false")
        new_perms: frozenset[str] | None = None
        if permissions is not None:
            if isinstance(permissions, (str, bytes)) or not isinstance(permissions, Iterable):
                raise InvalidInput("permissions must be a list of strings")
            perms = list(permissions)
            unknown = sorted(str(p) for p in perms if p not in CAPABILITIES)
            if unknown:
                raise InvalidInput(f"unknown permission {', '.join(map(repr, unknown))}; "
                                   f"known: {', '.join(CAPABILITIES)}")
            new_perms = frozenset(perms)
        if settings is not None:
            if not isinstance(settings, Mapping):
                raise InvalidInput("settings must be an object")
            if isinstance(entry.item, BrokenPlugin):
                raise InvalidInput(f"plugin {name!r} is broken ({entry.item.error}); "
                                   "its settings cannot be checked")
            merged = {**st.settings, **settings}
            model = entry.item.plugin.settings_model
            if model is not None:
                try:
                    model.model_validate(merged)
                except ValidationError as exc:
                    raise InvalidInput(f"settings of {name}: {_validation_message(exc)}") from None
            self._validate_settings(name, st, merged)
        if new_perms is not None:
            st.permissions = new_perms
        if enabled is not None:
            st.enabled = enabled
            if enabled:
                st.consecutive_failures, st.breaker_until = 0, 0.0
        self._changed(name)
        return self.describe(name)

    def _changed(self, name: str) -> None:
        self._stored.pop(name, None)
        if self.on_change is not None:
            try:
                self.on_change(name, self._entries[name].state.to_dict())
            except Exception:  # noqa: BLE001 - persisting is the host's job; a failure is logged
                _log.exception("plugin state callback failed")

    # listing ------------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """One plugin as the API shows it."""
        entry = self._entry(name)
        st, item = entry.state, entry.item
        out: dict[str, Any] = {
            "name": name, "version": None, "description": "", "origin": item.origin,
            "builtin": item.builtin, "enabled": st.enabled, "state": self._state_word(name),
            "capabilities": [], "permissions": sorted(st.permissions), "missing_permissions": [],
            "failures": st.failures, "last_error": st.last_error, "hooks": [], "macros": [],
            "tools": [], "settings": st.settings, "settings_schema": None,
            "settings_error": st.settings_error, "broken": None,
        }
        if isinstance(item, BrokenPlugin):
            out["broken"] = item.error
            return out
        p = item.plugin
        caps = p.capabilities
        out.update(
            version=p.version, description=p.description, capabilities=sorted(caps),
            missing_permissions=sorted(caps - st.permissions),
            hooks=[h.describe() for h in sorted(p.hooks, key=lambda h: (h.stage, h.sort_key))],
            macros=sorted(p.macros), tools=[t.describe() for t in p.tools.values()],
            settings_schema=p.settings_schema(),
        )
        return out

    def list(self) -> list[dict[str, Any]]:
        """Every plugin by name, then the duplicates that could not load (state "broken")."""
        out = [self.describe(n) for n in self.names()]
        for item in self.rejected:
            out.append({"name": item.name, "origin": item.origin, "builtin": item.builtin,
                        "enabled": False, "state": "broken", "broken": item.error})
        return out

    def _state_word(self, name: str) -> str:
        entry = self._entries[name]
        st = entry.state
        if isinstance(entry.item, BrokenPlugin):
            return "broken"
        if not st.enabled:
            return "disabled"
        if st.settings_error is not None:
            return "settings_invalid"
        if st.breaker_until and time.monotonic() < st.breaker_until:
            return "circuit_open"
        if not entry.item.plugin.capabilities <= st.permissions:
            return "waiting_permission"
        return "active"


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "settings"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)
