"""The hook kinds and capabilities of the plugin contract (R3, R12.6), as documented records.

Must not: run hooks or hold plugin state; docs/plugins.md is tested against these records.
"""

from __future__ import annotations

from dataclasses import dataclass

CAPABILITIES: dict[str, str] = {
    "prompt:read": "see the messages array in interceptors (stage 8)",
    "prompt:write": "change the messages array in interceptors (implies reading it)",
    "response:read": "see the answer: final text (stage 13) and stream deltas",
    "response:write": "change the final text or stream deltas (implies reading them)",
    "macros": "register macros with @plugin.macro",
    "tools": "register tools the model may call, with @plugin.tool",
    "memory": "read and write memory blocks",
    "network": "make network requests",
    "storage": "keep files or data of its own",
}
"""Every capability a hook may declare and the master may grant, with what it allows."""


@dataclass(frozen=True, slots=True)
class HookKind:
    """One kind of hook: where it runs, what its ctx carries, what it must declare."""

    kind: str
    stage: int
    stage_name: str
    """The stage name used in the change log."""
    ctx_fields: tuple[str, ...]
    """Fields specific to this kind (every ctx also has COMMON_CTX_FIELDS)."""
    read_capability: str
    write_capability: str
    default_capabilities: tuple[str, ...]
    default_timeout: float
    summary: str

    @property
    def decorator(self) -> str:
        return f"@plugin.{self.kind}"


HOOK_KINDS: dict[str, HookKind] = {
    "interceptor": HookKind(
        kind="interceptor",
        stage=8,
        stage_name="plugin_interceptors",
        ctx_fields=("messages", "may_edit"),
        read_capability="prompt:read",
        write_capability="prompt:write",
        default_capabilities=("prompt:write",),
        default_timeout=2.0,
        summary="view and change the messages array after context shifting",
    ),
    "postprocess": HookKind(
        kind="postprocess",
        stage=13,
        stage_name="postprocess_hooks",
        ctx_fields=("text",),
        read_capability="response:read",
        write_capability="response:write",
        default_capabilities=("response:write",),
        default_timeout=2.0,
        summary="process the final answer text before it is saved",
    ),
    "stream": HookKind(
        kind="stream",
        stage=13,
        stage_name="stream_hooks",
        ctx_fields=("delta", "text_so_far"),
        read_capability="response:read",
        write_capability="response:write",
        default_capabilities=("response:read",),
        default_timeout=0.5,
        summary="see (or change) each streamed delta on its way to the client",
    ),
}

COMMON_CTX_FIELDS: tuple[str, ...] = (
    "abort", "env", "settings", "log", "tour_id", "chat_id", "plugin", "hook", "expand_macros",
)
"""Fields every ctx has, whatever the hook kind (tool handlers get the same ctx)."""

REGISTRATIONS: dict[str, str] = {
    "macro": "macros",
    "tool": "tools",
}
"""Decorators that register something instead of hooking a stage, and the capability each needs."""

DEFAULT_TOOL_TIMEOUT = 30.0
"""Seconds a plugin tool handler may run before it is cancelled."""
