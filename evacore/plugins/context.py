"""What a hook receives: `ctx` objects per hook kind, built from one per-tour `CtxBase`.

Must not: decide whether a hook runs or check its changes (dispatch.py does); the abort
signal is handed on read-only, so a hook can wait for it but never fire it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from evacore.prompt.changelog import ChangeLog


class AbortLike(Protocol):
    """Anything with `is_set()` and `await wait()`: asyncio.Event, the tour's AbortSignal."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class AbortView:
    """The tour's abort signal as a hook sees it: it can check and wait, not fire."""

    __slots__ = ("_signal",)

    def __init__(self, signal: AbortLike) -> None:
        self._signal = signal

    def is_set(self) -> bool:
        return self._signal.is_set()

    async def wait(self) -> None:
        """Return once the tour is aborted (at once if it already is)."""
        if not self._signal.is_set():
            await self._signal.wait()

    @property
    def reason(self) -> str | None:
        return getattr(self._signal, "reason", None)


class _NeverAborted:
    def is_set(self) -> bool:
        return False

    async def wait(self) -> None:  # pragma: no cover - only reached by a hook that waits forever
        import asyncio

        await asyncio.Event().wait()


@dataclass(slots=True)
class CtxBase:
    """Per-tour facts the pipeline hands the dispatcher once; every hook's ctx is built from it."""

    tour_id: str = ""
    chat_id: str | None = None
    env: Mapping[str, bool] = field(default_factory=dict)
    abort: AbortLike = field(default_factory=_NeverAborted)
    changelog: ChangeLog | None = None
    """When set, the dispatcher appends its records here as well as returning them."""
    expand_macros: Callable[[str], str] | None = None
    """The tour's macro engine (stage 2); hooks call it through `ctx.expand_macros(text)`."""
    editable_protected: frozenset[str] = frozenset()
    """Ids of protected elements the host's own prompt scripts edit (the current input);
    any interceptor with `prompt:write` may edit protected content (never remove it)."""
    _env_view: Mapping[str, bool] | None = field(default=None, init=False, repr=False)
    _abort_view: AbortView | None = field(default=None, init=False, repr=False)

    @property
    def env_view(self) -> Mapping[str, bool]:
        if self._env_view is None:
            self._env_view = MappingProxyType(dict(self.env))
        return self._env_view

    @property
    def abort_view(self) -> AbortView:
        if self._abort_view is None:
            self._abort_view = AbortView(self.abort)
        return self._abort_view


class HookContext:
    """Fields every hook gets (and tool handlers): abort, env, settings, log, ids, macros."""

    __slots__ = ("_base", "_log", "hook", "plugin", "settings")

    def __init__(self, base: CtxBase, plugin: str, hook: str, settings: Any) -> None:
        self._base = base
        self.plugin = plugin
        """The plugin's name."""
        self.hook = hook
        """The hook's function name (or the tool's name)."""
        self.settings = settings
        """The plugin's validated settings (a model instance, or a read-only mapping)."""
        self._log: logging.LoggerAdapter[logging.Logger] | None = None

    @property
    def abort(self) -> AbortView:
        """The tour's abort signal: `is_set()` and `await wait()`. Stop when it fires."""
        return self._base.abort_view

    @property
    def env(self) -> Mapping[str, bool]:
        """The tour's environment flags (`telegram`, `client_ops`, `master`, `trusted`, `picture`)."""
        return self._base.env_view

    @property
    def tour_id(self) -> str:
        return self._base.tour_id

    @property
    def chat_id(self) -> str | None:
        return self._base.chat_id

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose lines carry the plugin, the hook and the tour."""
        if self._log is None:
            self._log = logging.LoggerAdapter(
                logging.getLogger(f"evacore.plugins.{self.plugin}"),
                {"plugin": self.plugin, "hook": self.hook, "tour_id": self.tour_id,
                 "chat_id": self.chat_id},
            )
        return self._log

    def expand_macros(self, text: str) -> str:
        """Resolve `{{macros}}` with the tour's macro engine (unknown ones stay as written)."""
        fn = self._base.expand_macros
        return fn(text) if fn is not None else text


class InterceptorContext(HookContext):
    """Stage 8: `ctx.messages` is this hook's own copy of the messages array."""

    __slots__ = ("_messages", "_provide")

    def __init__(self, base: CtxBase, plugin: str, hook: str, settings: Any,
                 provide: Callable[[], list[dict[str, Any]]]) -> None:
        HookContext.__init__(self, base, plugin, hook, settings)
        self._messages: list[dict[str, Any]] | None = None
        self._provide = provide

    @property
    def messages(self) -> list[dict[str, Any]]:
        """A list of dicts (`id`, `role`, `content`, `protected`, `source`, `kind`, `tokens`, …).
        Change it in place or assign a new list; the host checks and records the difference.
        The copy is made when first read, so a hook that never looks costs nothing."""
        if self._messages is None:
            self._messages = self._provide()
        return self._messages

    @messages.setter
    def messages(self, value: list[dict[str, Any]]) -> None:
        self._messages = value

    def may_edit(self, element: Mapping[str, Any]) -> bool:
        """Whether the host accepts a change to this element's content: always, for a hook
        holding `prompt:write` (R3.4 keeps protected elements present with their role and
        flag; their content may be edited)."""
        return isinstance(element, Mapping)

    @property
    def script_editable(self) -> frozenset[str]:
        """Protected element ids the host's own scripts edit in this tour (the input)."""
        return self._base.editable_protected

    def _taken(self) -> list[dict[str, Any]] | None:
        """The list the hook ended with, or None if it never touched `messages`."""
        return self._messages


class PostprocessContext(HookContext):
    """Stage 13: `ctx.text` is the final answer; assign to it to change it (response:write)."""

    __slots__ = ("text",)

    def __init__(self, base: CtxBase, plugin: str, hook: str, settings: Any, text: str) -> None:
        HookContext.__init__(self, base, plugin, hook, settings)
        self.text = text


class StreamContext(HookContext):
    """Stage 13, per delta: `ctx.delta` (assignable with response:write) and `ctx.text_so_far`."""

    __slots__ = ("_so_far", "delta")

    def __init__(self, base: CtxBase, plugin: str, hook: str, settings: Any, delta: str,
                 so_far: Callable[[], str]) -> None:
        HookContext.__init__(self, base, plugin, hook, settings)
        self.delta = delta
        self._so_far = so_far

    @property
    def text_so_far(self) -> str:
        """The answer the client has received before this delta."""
        return self._so_far()
