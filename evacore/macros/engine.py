"""The macro engine: a registry of macros and a left-to-right, inside-out evaluator.

Must not: know any macro's meaning (built-ins live in `builtins.py`, `variables.py`,
`timefmt.py`), touch storage, or rewrite text it does not recognise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from evacore.macros._parser import Macro, Node, Text, parse, split_args
from evacore.macros.env import MacroEnv

log = structlog.get_logger(__name__)

MacroFn = Callable[..., Any]
"""`fn(env, *args) -> str`, or `fn(env, call, *args)` when registered with `wants_call`."""

MAX_EXPANSION_DEPTH = 8
"""How deep text inserted by an expanding macro (e.g. `{{description}}`) is re-evaluated."""

TRIM_MARK = "\ue000trim\ue001"
_TRIM = re.compile(r"(?:\r?\n)*\ue000trim\ue001(?:\r?\n)*")
_NAME = re.compile(r"\s*(//|[A-Za-z_][A-Za-z0-9_]*)")
_UTC_OFFSET = re.compile(r"[+-]\d{1,2}(?:\.\d+)?")


@dataclass(frozen=True)
class MacroDef:
    """One registered macro."""

    name: str
    fn: MacroFn
    description: str
    min_args: int = 0
    max_args: int | None = 0
    """None = any number of arguments."""
    wants_call: bool = False
    """Pass a `MacroCall` (offset, source, per-evaluation state) after the env."""
    expand_result: bool = False
    """Evaluate macros inside the returned text (card fields such as `{{description}}`)."""
    lazy: bool = False
    """Do not evaluate the arguments or the body at all (`{{// comment}}`)."""
    aliases: tuple[str, ...] = ()


@dataclass
class MacroCall:
    """Where a call sits: its offset in `source`, and state shared by one `evaluate`."""

    offset: int
    source: str
    raw: str
    state: dict[str, Any] = field(default_factory=dict)


class MacroEngine:
    """Evaluates `{{name::arg::…}}` macros; unknown ones stay exactly as written.

    Names are matched case-insensitively. Built-ins are registered on construction unless
    `builtins=False`.
    """

    def __init__(self, *, builtins: bool = True) -> None:
        self._defs: dict[str, MacroDef] = {}
        self._resolvers: list[Callable[[str], MacroDef | None]] = []
        if builtins:
            from evacore.macros.builtins import register_builtins

            register_builtins(self)

    def register(
        self,
        name: str,
        fn: MacroFn,
        *,
        description: str,
        min_args: int = 0,
        max_args: int | None = None,
        aliases: tuple[str, ...] = (),
        wants_call: bool = False,
        expand_result: bool = False,
        lazy: bool = False,
    ) -> MacroDef:
        """Add or replace a macro. `fn(env, *args)` returns the replacement text."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid macro name {name!r}")
        definition = MacroDef(
            name, fn, description, min_args, max_args, wants_call, expand_result, lazy, aliases
        )
        for key in (name, *aliases):
            self._defs[key.lower()] = definition
        return definition

    def unregister(self, name: str) -> None:
        definition = self._defs.get(name.lower())
        if definition is None:
            return
        for key in (definition.name, *definition.aliases):
            self._defs.pop(key.lower(), None)

    def get(self, name: str) -> MacroDef | None:
        return self._defs.get(name.lower())

    def add_resolver(self, resolve: Callable[[str], MacroDef | None]) -> None:
        """Look names the registry lacks up at call time (`resolve(name)`), so macros that
        come and go while the process runs (plugin macros) are found as they are now."""
        self._resolvers.append(resolve)

    def _lookup(self, name: str) -> MacroDef | None:
        definition = self._defs.get(name.lower())
        if definition is None:
            for resolve in self._resolvers:
                definition = resolve(name)
                if definition is not None:
                    break
        return definition

    def definitions(self) -> list[MacroDef]:
        """Each registered macro once, in registration order."""
        seen: dict[int, MacroDef] = {}
        for definition in self._defs.values():
            seen.setdefault(id(definition), definition)
        return list(seen.values())

    def evaluate(self, text: str, env: MacroEnv) -> str:
        """Resolve every known macro in `text` against `env` (variables change in place)."""
        if "{{" not in text and "<" not in text and "\\" not in text:
            return text
        state: dict[str, Any] = {}
        out = self._eval_text(text, env, state, 0)
        if TRIM_MARK in out:
            out = _TRIM.sub("", out)
        return out

    # evaluation

    def _eval_text(self, text: str, env: MacroEnv, state: dict[str, Any], depth: int) -> str:
        return "".join(self._eval_nodes(parse(text), text, env, state, depth))

    def _eval_nodes(
        self, nodes: list[Node], source: str, env: MacroEnv, state: dict[str, Any], depth: int
    ) -> list[str]:
        parts: list[str] = []
        for node in nodes:
            if isinstance(node, Text):
                parts.append(node.value)
            else:
                parts.append(self._eval_macro(node, source, env, state, depth))
        return parts

    def _eval_macro(
        self, node: Macro, source: str, env: MacroEnv, state: dict[str, Any], depth: int
    ) -> str:
        if node.legacy_name is not None:
            name, arg_nodes = node.legacy_name, []
        else:
            resolved = _split_call(node)
            if resolved is None:
                return node.raw
            name, arg_nodes = resolved
        definition = self._lookup(name)
        if definition is None:
            key = next((k for k in env.extra if k.lower() == name.lower()), None)
            if key is None or arg_nodes:
                return node.raw
            return self._eval_text(env.extra[key], env, state, depth + 1)
        if definition.lazy:
            return str(definition.fn(env))
        count = len(arg_nodes)
        if count < definition.min_args or (
            definition.max_args is not None and count > definition.max_args
        ):
            log.warning("macro.bad_arguments", macro=definition.name, count=count)
            return node.raw
        args = [
            "".join(self._eval_nodes(a, source, env, state, depth)).replace(TRIM_MARK, "")
            for a in arg_nodes
        ]
        if definition.wants_call:
            call = MacroCall(node.start, source, node.raw, state)
            result = definition.fn(env, call, *args)
        else:
            result = definition.fn(env, *args)
        text = "" if result is None else str(result)
        if definition.expand_result and text and depth < MAX_EXPANSION_DEPTH:
            text = self._eval_text(text, env, state, depth + 1)
        return text


def _split_call(node: Macro) -> tuple[str, list[list[Node]]] | None:
    """Name and argument node lists of a call, or None when the name is not a macro name.

    Forms: `{{name}}`, `{{name::a::b}}`, and the legacy single-argument forms
    `{{name:arg}}` and `{{name arg}}` (also `{{time_UTC+2}}`).
    """
    segments = split_args(node.body)
    head = segments[0]
    if not head or not isinstance(head[0], Text):
        return None
    first = head[0].value
    match = _NAME.match(first)
    if match is None:
        return None
    name = match.group(1)
    rest = first[match.end() :]
    if name == "//":
        return name, []
    args = segments[1:]
    if not head[1:] and not rest.strip():
        return name, args
    if name.lower() == "time_utc" and not head[1:] and not args and _UTC_OFFSET.fullmatch(rest):
        return "time", [[Text("UTC" + rest)]]
    if rest[:1] == ":" or rest[:1].isspace():
        legacy = rest[1:] if rest[:1] == ":" else rest.lstrip()
        legacy_nodes: list[Node] = ([Text(legacy)] if legacy else []) + head[1:]
        return name, [legacy_nodes, *args]
    return None
