"""The tool registry: tool records, who is offered which tool, and one safe way to run a call (R5).

Must not: know any concrete tool, read settings files or the environment, or ever let a
tool's failure escape as an exception (a failure is an `error: …` result, R5.3).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog

from evacore.errors import Conflict, EvacoreError, InvalidInput, ToolError

log = structlog.get_logger(__name__)

Role = Literal["master", "trusted", "guest"]
ROLES: tuple[str, ...] = ("master", "trusted", "guest")
ENV_FLAGS: frozenset[str] = frozenset({"telegram", "client_ops", "master", "trusted", "picture"})
KINDS: frozenset[str] = frozenset(
    {"read", "write", "machine", "memory", "rules", "channel", "client_op", "plugin"}
)
GUEST_FORBIDDEN_KINDS: frozenset[str] = frozenset({"read", "write", "machine", "rules"})
"""Kinds never offered to a guest, whatever the policy says: they touch the core's machine or rules."""

# A role sees by default every tool listed for itself or for a role below it.
_ROLE_COVERS: dict[str, frozenset[str]] = {
    "master": frozenset({"master", "trusted", "guest"}),
    "trusted": frozenset({"trusted", "guest"}),
    "guest": frozenset({"guest"}),
}
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OFFERED_KEPT = 64
"""Answers of `ToolRegistry.offered` one registry keeps (roles times flag sets in use)."""


@dataclass(frozen=True)
class ToolSettings:
    """Limits of the built-in tools; the server builds this from its settings."""

    shell_timeout: float = 30.0
    """Seconds a `shell` call may run when the model gives no `timeout`."""
    shell_max_timeout: float = 600.0
    """Largest `timeout` a `shell` call may ask for; larger requests are lowered to it."""
    shell_output_cap: int = 100_000
    """Bytes of shell output kept (first half and last half); the rest is read and dropped."""
    shell_kill_grace: float = 2.0
    """Seconds between SIGTERM and SIGKILL when a shell's process group is stopped."""
    read_max_bytes: int = 256_000
    """Bytes of text one `read_file` call returns at most."""
    write_max_bytes: int = 10_000_000
    """Largest content `write_file` / `write_diff` will write."""
    list_max_entries: int = 1_000
    """Entries one `list_dir` call returns at most."""
    client_op_timeout: float = 60.0
    """Seconds a client op may take before its call gets an `error:` result (R9.2)."""
    tool_timeouts: Mapping[str, float] = field(default_factory=dict)
    """Per tool name, a timeout replacing the tool's own `timeout`."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool handler may know about the tour it runs in."""

    workspace: Path
    role: str
    env: frozenset[str]
    abort: asyncio.Event
    tour_id: str = ""
    chat_id: str = ""
    services: Mapping[str, object] = field(default_factory=dict)
    settings: ToolSettings = field(default_factory=ToolSettings)
    policy: ToolPolicy = field(default_factory=lambda: ToolPolicy())
    call_id: str = ""
    """Set by `run_tool` for the call being run."""

    def service(self, name: str) -> Any:
        """The integration point `name`, or a ToolError saying it is not available."""
        found = self.services.get(name)
        if found is None:
            raise ToolError(f"{name} is not available in this tour")
        return found


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """One tool the model may call."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    handler: Handler
    roles: frozenset[str]
    kind: str
    requires_env: frozenset[str] = frozenset()
    timeout: float | None = 30.0
    """Seconds before `run_tool` cancels the call; None: the tool bounds itself."""
    concurrency_safe: bool = False

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise InvalidInput(f"tool name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}")
        if self.kind not in KINDS:
            raise InvalidInput(f"tool {self.name}: unknown kind {self.kind!r}")
        if not set(self.roles) <= set(ROLES):
            raise InvalidInput(f"tool {self.name}: roles must be among {', '.join(ROLES)}")
        if not set(self.requires_env) <= ENV_FLAGS:
            raise InvalidInput(f"tool {self.name}: unknown env flag in requires_env")
        if not isinstance(self.parameters, Mapping) or self.parameters.get("type") != "object":
            raise InvalidInput(f"tool {self.name}: parameters must be a JSON schema of type object")

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool shape of this tool, built once: every tour offering the
        tool sends this same object, so it must never be changed (copy it to alter it)."""
        built = self.__dict__.get("_schema")
        if built is None:
            built = {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": dict(self.parameters),
                },
            }
            self.__dict__["_schema"] = built  # a frozen dataclass: the cache goes around it
        return built


@dataclass(frozen=True)
class ToolPolicy:
    """Per-role overrides of which tools are offered, on top of each tool's own `roles`.

    Entries are a tool name, `kind:<kind>` or `*`. `deny` wins over `allow`; a tool not named
    either way follows its own `roles`. Guests never get tools of GUEST_FORBIDDEN_KINDS.
    """

    allow: Mapping[str, frozenset[str]] = field(default_factory=dict)
    deny: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, table: Mapping[str, Any] | None) -> ToolPolicy:
        """Build from `{"trusted": {"allow": ["shell"], "deny": ["kind:memory"]}, …}`."""
        allow: dict[str, frozenset[str]] = {}
        deny: dict[str, frozenset[str]] = {}
        for role, rules in (table or {}).items():
            if role not in ROLES:
                raise InvalidInput(f"tool policy: unknown role {role!r}")
            if not isinstance(rules, Mapping) or not set(rules) <= {"allow", "deny"}:
                raise InvalidInput(f"tool policy for {role}: expected an object with allow/deny")
            for key, target in (("allow", allow), ("deny", deny)):
                entries = rules.get(key, [])
                if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
                    raise InvalidInput(f"tool policy for {role}.{key}: expected a list of names")
                for entry in entries:
                    _check_entry(role, key, entry)
                target[role] = frozenset(entries)
        return cls(allow=allow, deny=deny)

    def permits(self, tool: Tool, role: str) -> bool:
        """Whether `role` may be offered `tool` (environment aside)."""
        if role not in ROLES:
            return False
        if role == "guest" and tool.kind in GUEST_FORBIDDEN_KINDS:
            return False
        if _matches(self.deny.get(role, frozenset()), tool):
            return False
        if _matches(self.allow.get(role, frozenset()), tool):
            return True
        return bool(tool.roles & _ROLE_COVERS[role])


def _check_entry(role: str, key: str, entry: str) -> None:
    if entry.startswith("kind:"):
        kind = entry[5:]
        if kind not in KINDS:
            raise InvalidInput(f"tool policy for {role}.{key}: unknown kind {kind!r}")
        if role == "guest" and key == "allow" and kind in GUEST_FORBIDDEN_KINDS:
            raise InvalidInput(f"tool policy: guests may never be offered tools of kind {kind}")
    elif entry != "*" and not _NAME_RE.match(entry):
        raise InvalidInput(f"tool policy for {role}.{key}: {entry!r} is not a tool name")


def _matches(entries: frozenset[str], tool: Tool) -> bool:
    return "*" in entries or tool.name in entries or f"kind:{tool.kind}" in entries


class ToolRegistry:
    """The tools known to the process (or, via `with_tools`, to one tour)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._offered: dict[tuple[str, frozenset[str], int], tuple[ToolPolicy, list[Tool]]] = {}
        """What `offered` answered, by role, flags and policy (the policy kept with it, so
        its id is not reused meanwhile); emptied whenever the tools change."""
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise Conflict(f"a tool named {tool.name} is already registered")
        self._tools[tool.name] = tool
        self._offered.clear()

    def register_all(self, tools: Iterable[Tool]) -> None:
        """Register each tool whose name is not taken yet (the first registered wins)."""
        for tool in tools:
            if tool.name not in self._tools:
                self._tools[tool.name] = tool
        self._offered.clear()

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._offered.clear()

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def with_tools(self, extra: Iterable[Tool]) -> ToolRegistry:
        """A new registry with these tools plus `extra` (e.g. a tour's client ops)."""
        return ToolRegistry([*self._tools.values(), *extra])

    def is_offered(self, tool: Tool, role: str, env: Iterable[str], *, policy: ToolPolicy) -> bool:
        return tool.requires_env <= frozenset(env) and policy.permits(tool, role)

    def offered(self, role: str, env: Iterable[str], *, policy: ToolPolicy) -> list[Tool]:
        """The tools a tour with this role and environment is offered, in registration order
        (worked out once per role, flags and policy while the tools stay the same)."""
        flags = frozenset(env)
        key = (role, flags, id(policy))
        known = self._offered.get(key)
        if known is not None and known[0] is policy:
            return list(known[1])
        tools = [t for t in self._tools.values() if self.is_offered(t, role, flags, policy=policy)]
        if len(self._offered) >= OFFERED_KEPT:
            self._offered.clear()
        self._offered[key] = (policy, tools)
        return list(tools)

    def table(self, policy: ToolPolicy) -> dict[str, list[str]]:
        """Per role, the tool names it may be offered when the environment allows."""
        return {r: [t.name for t in self._tools.values() if policy.permits(t, r)] for r in ROLES}

    @staticmethod
    def schemas(tools: Iterable[Tool]) -> list[dict[str, Any]]:
        return [tool.schema() for tool in tools]


@dataclass(frozen=True)
class ToolOutcome:
    """The exact text a call produced (stored and streamed as is), and whether it failed."""

    output: str
    error: bool
    duration_ms: int


_JSON_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def workspace_relative(text: str, workspace: Path) -> str:
    """`text` with the workspace's absolute path (as given and as resolved) written as a
    path relative to it: a tool's message never shows where the workspace is on the machine."""
    roots = {str(workspace).rstrip(os.sep), os.path.realpath(workspace).rstrip(os.sep)}
    for root in sorted((r for r in roots if r), key=len, reverse=True):
        text = text.replace(root + os.sep, "").replace(root, ".")
    return text


def _json_type_name(value: object) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


def parse_arguments(arguments: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a call's JSON arguments and check required names, types and enums (a ToolError if not)."""
    if arguments.strip() == "":
        parsed: object = {}
    else:
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ToolError(f"arguments must be a JSON object, got {_json_type_name(parsed)}")
    for name in schema.get("required", []):
        if name not in parsed:
            raise ToolError(f"missing required argument '{name}'")
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name, value in parsed.items():
        spec = properties.get(name)
        if spec is None:
            if schema.get("additionalProperties") is False:
                raise ToolError(f"unknown argument '{name}'")
            continue
        wanted = spec.get("type")
        types = [wanted] if isinstance(wanted, str) else list(wanted or [])
        if types and not any(_JSON_TYPES.get(t, lambda v: True)(value) for t in types):
            got = _json_type_name(value)
            raise ToolError(f"argument '{name}' must be {' or '.join(types)}, got {got}")
        if "enum" in spec and value not in spec["enum"]:
            allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
            raise ToolError(f"argument '{name}' must be one of {allowed}")
    return parsed


async def run_tool(registry: ToolRegistry, name: str, arguments: str, ctx: ToolContext, *,
                   call_id: str = "") -> ToolOutcome:
    """Run one call and always return its outcome; only the caller's own cancellation raises."""
    started = time.monotonic()

    def done(output: str, error: bool) -> ToolOutcome:
        return ToolOutcome(output, error, int((time.monotonic() - started) * 1000))

    tool = registry.get(name)
    if tool is None or not registry.is_offered(tool, ctx.role, ctx.env, policy=ctx.policy):
        offered = ", ".join(t.name for t in registry.offered(ctx.role, ctx.env, policy=ctx.policy))
        return done(f"error: unknown tool '{name}'; available: {offered or 'none'}", True)
    try:
        args = parse_arguments(arguments, tool.parameters)
    except ToolError as exc:
        return done(f"error: {exc.message}", True)
    if ctx.abort.is_set():
        return done("error: aborted", True)
    timeout = ctx.settings.tool_timeouts.get(name, tool.timeout)
    call_ctx = dataclasses.replace(ctx, call_id=call_id)
    task = asyncio.ensure_future(_invoke(tool, args, call_ctx))
    aborted = asyncio.ensure_future(ctx.abort.wait())
    try:
        await asyncio.wait({task, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _stop(task)
        raise
    finally:
        aborted.cancel()
    if not task.done():
        await _stop(task)
        if ctx.abort.is_set():
            return done("error: aborted", True)
        return done(f"error: timed out after {timeout:g}s", True)
    if task.cancelled():
        return done("error: the tool was cancelled", True)
    exc = task.exception()
    if exc is None:
        result = task.result()
        if not isinstance(result, str):
            return done(f"error: tool {name} returned {type(result).__name__}, not text", True)
        return done(result, False)
    if isinstance(exc, ToolError):
        return done(f"error: {exc.message}", True)
    if isinstance(exc, EvacoreError):
        log.info("tool.refused", tool=name, error=exc.code)
    else:
        log.warning("tool.failed", tool=name, error=type(exc).__name__, exc_info=exc)
    return done(f"error: {type(exc).__name__}: {workspace_relative(str(exc), ctx.workspace)}",
                True)


async def _invoke(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str:
    """Call the handler inside the task, so that even a handler that is not a coroutine
    function fails as a result rather than in the caller."""
    result: Any = tool.handler(args, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result  # type: ignore[no-any-return]


async def _stop(task: asyncio.Future[str]) -> None:
    """Cancel a handler and wait until its cleanup (e.g. killing a process group) is over."""
    task.cancel()
    interrupted = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            interrupted = True
    if not task.cancelled():
        task.exception()  # retrieved: a failure during cancellation is not reported twice
    if interrupted:
        raise asyncio.CancelledError
