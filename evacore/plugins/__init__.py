"""Plugins: the authoring API (`Plugin`, ctx types), discovery, the manager and the dispatcher.

Must not: hold code here; this module only re-exports (the public names are in `__all__`).
"""

from evacore.plugins.context import (
    AbortView,
    CtxBase,
    HookContext,
    InterceptorContext,
    PostprocessContext,
    StreamContext,
)
from evacore.plugins.discovery import BrokenPlugin, LoadedPlugin, discover
from evacore.plugins.dispatch import Dispatcher, HookRecord, InterceptResult
from evacore.plugins.manager import PluginManager, PluginState
from evacore.plugins.manifest import HookSpec, MacroSpec, Plugin, PluginDefinitionError, ToolSpec
from evacore.plugins.spec import CAPABILITIES, HOOK_KINDS
from evacore.plugins.stream import StreamHooks

__all__ = [
    "CAPABILITIES",
    "HOOK_KINDS",
    "AbortView",
    "BrokenPlugin",
    "CtxBase",
    "Dispatcher",
    "HookContext",
    "HookRecord",
    "HookSpec",
    "InterceptResult",
    "InterceptorContext",
    "LoadedPlugin",
    "MacroSpec",
    "Plugin",
    "PluginDefinitionError",
    "PluginManager",
    "PluginState",
    "PostprocessContext",
    "StreamContext",
    "StreamHooks",
    "ToolSpec",
    "discover",
]
