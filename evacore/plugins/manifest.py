"""The plugin authoring API (R12.6): `Plugin`, its hook decorators, and the manifest it declares.

Must not: import or run plugins, or know which permissions are granted; a definition error
is raised here, at load time, so discovery can mark the plugin broken.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from evacore.errors import InvalidInput
from evacore.plugins.spec import CAPABILITIES, DEFAULT_TOOL_TIMEOUT, HOOK_KINDS

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MACRO = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

HookFn = Callable[[Any], Any]


class PluginDefinitionError(InvalidInput):
    """The plugin's definition is not valid."""

    code = "plugin_invalid"


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One declared hook: `plugin.name` is its key in logs; order key (priority, plugin, name)."""

    plugin: str
    name: str
    stage: str
    """The hook kind: "interceptor", "postprocess" or "stream"."""
    priority: int
    capabilities: frozenset[str]
    timeout: float
    fn: HookFn
    writes: bool
    """True when it declared the write capability of its kind (else its changes are rejected)."""

    @property
    def key(self) -> str:
        return f"{self.plugin}.{self.name}"

    @property
    def sort_key(self) -> tuple[int, str, str]:
        return (self.priority, self.plugin, self.name)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "priority": self.priority,
                "capabilities": sorted(self.capabilities), "timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class MacroSpec:
    """A macro a plugin registers: `fn(env, *args) -> str`, called by the macro engine."""

    plugin: str
    name: str
    fn: Callable[..., Any]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool a plugin offers the model: `async def handler(args, ctx) -> str`."""

    plugin: str
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    timeout: float

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _check_capabilities(where: str, capabilities: Iterable[str]) -> frozenset[str]:
    if isinstance(capabilities, str):
        raise PluginDefinitionError(f"{where}: capabilities must be a list, not the string {capabilities!r}")
    caps = frozenset(capabilities)
    unknown = sorted(c for c in caps if c not in CAPABILITIES)
    if unknown:
        raise PluginDefinitionError(
            f"{where}: unknown capability {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(CAPABILITIES)}"
        )
    return caps


def _check_timeout(where: str, timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise PluginDefinitionError(f"{where}: timeout must be a number of seconds, got {timeout!r}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise PluginDefinitionError(f"{where}: timeout must be > 0 seconds, got {timeout!r}")
    return float(timeout)


class Plugin:
    """A plugin: `plugin = Plugin(name="my-plugin", version="1.0", settings=MySettings)`."""

    def __init__(self, name: str, version: str = "0.0.0", *, settings: type[BaseModel] | None = None,
                 description: str = "") -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise PluginDefinitionError(
                f"plugin name {name!r} must be 1-64 chars of letters, digits, '_', '.', '-'"
            )
        if settings is not None and not (isinstance(settings, type) and issubclass(settings, BaseModel)):
            raise PluginDefinitionError(f"plugin {name}: settings must be a pydantic model class")
        self.name = name
        self.version = str(version)
        self.description = description
        self.settings_model = settings
        self.hooks: list[HookSpec] = []
        self.macros: dict[str, MacroSpec] = {}
        self.tools: dict[str, ToolSpec] = {}

    def __repr__(self) -> str:
        return f"Plugin({self.name!r}, {self.version!r}, hooks={len(self.hooks)})"

    # hook decorators ---------------------------------------------------------------------
    def interceptor(self, fn: HookFn | None = None, *, priority: int = 100,
                    capabilities: Iterable[str] | None = None, timeout: float | None = None) -> Any:
        """Stage 8 hook on `ctx.messages`. Lower priority runs first."""
        return self._hook("interceptor", fn, priority, capabilities, timeout)

    def postprocess(self, fn: HookFn | None = None, *, priority: int = 100,
                    capabilities: Iterable[str] | None = None, timeout: float | None = None) -> Any:
        """Stage 13 hook on the final answer `ctx.text`."""
        return self._hook("postprocess", fn, priority, capabilities, timeout)

    def stream(self, fn: HookFn | None = None, *, priority: int = 100,
               capabilities: Iterable[str] | None = None, timeout: float | None = None) -> Any:
        """Stage 13 hook on each streamed `ctx.delta`; `timeout` is per delta."""
        return self._hook("stream", fn, priority, capabilities, timeout)

    def _hook(self, kind: str, fn: HookFn | None, priority: int, capabilities: Iterable[str] | None,
              timeout: float | None) -> Any:
        spec = HOOK_KINDS[kind]
        where = f"plugin {self.name}: @{kind}"
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise PluginDefinitionError(f"{where}: priority must be an integer, got {priority!r}")
        caps = _check_capabilities(where, spec.default_capabilities if capabilities is None else capabilities)
        if spec.read_capability not in caps and spec.write_capability not in caps:
            raise PluginDefinitionError(
                f"{where}: declare {spec.read_capability!r} or {spec.write_capability!r}"
            )
        secs = _check_timeout(where, spec.default_timeout if timeout is None else timeout)

        def register(f: HookFn) -> HookFn:
            name = getattr(f, "__name__", "")
            if not inspect.iscoroutinefunction(f):
                raise PluginDefinitionError(f"{where}: hook {name or f!r} must be an `async def` function")
            if not _IDENT.match(name):
                raise PluginDefinitionError(f"{where}: hook needs a plain function name, got {name!r}")
            if any(h.stage == kind and h.name == name for h in self.hooks):
                raise PluginDefinitionError(f"{where}: a {kind} hook named {name!r} is already declared")
            self.hooks.append(HookSpec(self.name, name, kind, priority, caps, secs, f,
                                       spec.write_capability in caps))
            return f

        return register(fn) if fn is not None else register

    # registrations -----------------------------------------------------------------------
    def macro(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register `fn(env, *args) -> str` as macro `{{name}}` / `{{name::arg::…}}` (capability macros)."""
        if not isinstance(name, str) or not _MACRO.match(name):
            raise PluginDefinitionError(f"plugin {self.name}: bad macro name {name!r}")

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(fn) or inspect.iscoroutinefunction(fn):
                raise PluginDefinitionError(
                    f"plugin {self.name}: macro {name!r} must be a plain (not async) function"
                )
            if name in self.macros:
                raise PluginDefinitionError(f"plugin {self.name}: macro {name!r} declared twice")
            self.macros[name] = MacroSpec(self.name, name, fn)
            return fn

        return register

    def tool(self, *, name: str, description: str, parameters: dict[str, Any] | None = None,
             timeout: float = DEFAULT_TOOL_TIMEOUT) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register `async def handler(args, ctx) -> str` as a tool the model may call (capability tools)."""
        where = f"plugin {self.name}: tool {name!r}"
        if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_-]{1,64}$", name):
            raise PluginDefinitionError(f"{where}: name must be 1-64 of letters, digits, '_', '-'")
        if not isinstance(description, str) or not description.strip():
            raise PluginDefinitionError(f"{where}: a description is required")
        params = parameters if parameters is not None else {"type": "object", "properties": {}}
        if not isinstance(params, dict) or params.get("type") != "object":
            raise PluginDefinitionError(f"{where}: parameters must be a JSON schema with type 'object'")
        secs = _check_timeout(where, timeout)

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if not inspect.iscoroutinefunction(fn):
                raise PluginDefinitionError(f"{where}: the handler must be an `async def` function")
            if name in self.tools:
                raise PluginDefinitionError(f"{where}: declared twice")
            self.tools[name] = ToolSpec(self.name, name, description, params, fn, secs)
            return fn

        return register

    # manifest ----------------------------------------------------------------------------
    @property
    def capabilities(self) -> frozenset[str]:
        """Every capability the plugin declares (hooks, plus macros/tools if it registers any)."""
        caps: set[str] = set()
        for h in self.hooks:
            caps |= h.capabilities
        if self.macros:
            caps.add("macros")
        if self.tools:
            caps.add("tools")
        return frozenset(caps)

    def settings_schema(self) -> dict[str, Any] | None:
        return self.settings_model.model_json_schema() if self.settings_model is not None else None

    def manifest(self) -> dict[str, Any]:
        """The declarative description: name, version, hooks, macros, tools, settings schema."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "capabilities": sorted(self.capabilities),
            "hooks": [h.describe() for h in sorted(self.hooks, key=lambda h: (h.stage, h.sort_key))],
            "macros": sorted(self.macros),
            "tools": [t.describe() for t in self.tools.values()],
            "settings_schema": self.settings_schema(),
        }
