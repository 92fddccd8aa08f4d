"""The macro engine: a registry of macros and a left-to-right, inside-out evaluator.

Must not: know any macro's meaning (built-ins live in `builtins.py`, `variables.py`,
`timefmt.py`), touch storage, or rewrite text it does not recognise.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from evacore.macros._parser import (
    KEPT_TEXT_CHARS,
    KEPT_TEXTS,
    Macro,
    Node,
    Text,
    parsed,
    split_args,
)
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
        return "".join(self._eval_nodes(parsed(text), text, env, state, depth))

    def _eval_nodes(
        self, nodes: list[Node] | tuple[Node, ...], source: str, env: MacroEnv,
        state: dict[str, Any], depth: int
    ) -> list[str]:
        parts: list[str] = []
        i = 0
        while i < len(nodes):
            node = nodes[i]
            i += 1
            if isinstance(node, Text):
                parts.append(node.value)
                continue
            opener = _opener(node)
            if opener is not None and "/" + opener[0] in _closers(source):
                end = _closer(nodes, i, opener[0])
                if end is not None:
                    parts.append(self._eval_scoped(node, opener, nodes[i:end], source, env,
                                                   state, depth))
                    i = end + 1
                    continue
            parts.append(self._eval_macro(node, source, env, state, depth))
        return parts

    # scoped blocks: `{{//}}…{{///}}`, `{{if c}}…{{else}}…{{/if}}`, `{{name args}}…{{/name}}`

    def _eval_scoped(self, node: Macro, opener: tuple[str, bool, str], body: list[Node],
                     source: str, env: MacroEnv, state: dict[str, Any], depth: int) -> str:
        name, keep, _rest = opener
        if name == "//":
            return ""  # a scoped comment: nothing inside is evaluated or kept
        if name == "if":
            return self._eval_if(node, keep, body, source, env, state, depth)
        definition = self._lookup(name)
        if definition is None:
            inner = "".join(self._eval_nodes(body, source, env, state, depth))
            return self._unknown(node, source, env, state, depth) + inner + "{{/" + name + "}}"
        resolved = _split_call(_unflagged(node))
        args = resolved[1] if resolved is not None else []
        count = len(args) + 1  # the block's text is the last argument
        if definition.lazy or count < definition.min_args or (
                definition.max_args is not None and count > definition.max_args):
            # a macro that takes no such argument: no block, each part evaluated as written
            log.warning("macro.bad_arguments", macro=definition.name, count=count)
            inner = "".join(self._eval_nodes(body, source, env, state, depth))
            return (self._eval_macro(node, source, env, state, depth) + inner
                    + "{{/" + name + "}}")
        text = "".join(self._eval_nodes(body, source, env, state, depth))
        if not keep:
            text = _dedent(text)
        values = ["".join(self._eval_nodes(a, source, env, state, depth)) for a in args]
        return self._call(definition, node, source, env, state, depth, [*values, text])

    def _eval_if(self, node: Macro, keep: bool, body: list[Node], source: str, env: MacroEnv,
                 state: dict[str, Any], depth: int) -> str:
        resolved = _split_call(_unflagged(node))
        args = resolved[1] if resolved is not None else []
        cond = "::".join("".join(self._eval_nodes(a, source, env, state, depth))
                         for a in args).strip()
        negate = cond.startswith("!")
        if negate:
            cond = cond[1:].strip()
        value = self._condition_value(cond, source, env, state, depth)
        truthy = value.strip().lower() not in _FALSY
        if negate:
            truthy = not truthy
        then, otherwise = _split_else(body)
        chosen = then if truthy else otherwise
        text = "".join(self._eval_nodes(chosen, source, env, state, depth))
        return text if keep else _dedent(text)

    def _condition_value(self, cond: str, source: str, env: MacroEnv, state: dict[str, Any],
                         depth: int) -> str:
        """`.name` / `$name`: a local / global variable; a macro name that needs no
        argument: its value; anything else: the text itself."""
        var = _VAR.fullmatch(cond)
        if var is not None:
            return self._var(var.group(1), var.group(2), env)
        definition = self._lookup(cond) if _NAME.fullmatch(cond) else None
        if definition is not None and definition.min_args == 0 and not definition.lazy:
            return self._eval_text("{{" + cond + "}}", env, state, depth + 1)
        return cond

    def _var(self, sigil: str, name: str, env: MacroEnv) -> str:
        fn = self._lookup("getvar" if sigil == "." else "getglobalvar")
        return str(fn.fn(env, name)) if fn is not None else ""

    def _unknown(self, node: Macro, source: str, env: MacroEnv, state: dict[str, Any],
                 depth: int) -> str:
        """An unknown macro stays as written, with the macros nested in it resolved."""
        if not any(isinstance(n, Macro) for n in node.body):
            return node.raw
        return "{{" + "".join(self._eval_nodes(node.body, source, env, state, depth)) + "}}"

    def _eval_macro(
        self, node: Macro, source: str, env: MacroEnv, state: dict[str, Any], depth: int
    ) -> str:
        if node.legacy_name is not None:
            name, arg_nodes = node.legacy_name, []
        else:
            var = _var_call(node)
            if var is not None:  # `{{.name}}` / `{{$name}}`: variable shorthands
                return self._var(var[0], var[1], env)
            resolved = _split_call(node)
            if resolved is None:
                return self._unknown(node, source, env, state, depth)
            name, arg_nodes = resolved
        definition = self._lookup(name)
        if definition is None:
            key = next((k for k in env.extra if k.lower() == name.lower()), None)
            if key is None or arg_nodes:
                return self._unknown(node, source, env, state, depth)
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
        return self._call(definition, node, source, env, state, depth, args)

    def _call(self, definition: MacroDef, node: Macro, source: str, env: MacroEnv,
              state: dict[str, Any], depth: int, args: list[str]) -> str:
        if definition.wants_call:
            call = MacroCall(node.start, source, node.raw, state)
            result = definition.fn(env, call, *args)
        else:
            result = definition.fn(env, *args)
        text = "" if result is None else str(result)
        if definition.expand_result and text and depth < MAX_EXPANSION_DEPTH:
            text = self._eval_text(text, env, state, depth + 1)
        return text


_FALSY = frozenset({"", "false", "off", "0"})
_VAR = re.compile(r"([.$])([A-Za-z_][\w.-]*)")
_SCOPE_NAME = re.compile(r"\s*(#?)(//|/?[A-Za-z_][A-Za-z0-9_]*)")


def _head(node: Macro) -> str | None:
    """The literal text a macro's body starts with (None for a legacy marker)."""
    if node.legacy_name is not None or not node.body or not isinstance(node.body[0], Text):
        return None
    return node.body[0].value


T = TypeVar("T")
_READS_LIMIT = 8192
"""Nodes whose reading (`_opener`, `_var_call`, `_split_call`) is kept, per kind."""


def _kept_reading(read: Callable[[Macro], T]) -> Callable[[Macro], T]:
    """`read(node)` kept by the node's identity: the parsed texts are kept (`parsed`), so a
    card's or a preset's macros are the same nodes every tour, and what a node says (its
    name, its arguments, whether it opens a block) is read once, not every tour. The node is
    kept with its reading (its identity is not reused while the entry lives); the readings
    are never changed by their callers."""
    kept: dict[int, tuple[Macro, T]] = {}

    def reading(node: Macro) -> T:
        hit = kept.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        value = read(node)
        if len(kept) >= _READS_LIMIT:
            kept.clear()
        kept[id(node)] = (node, value)
        return value

    return functools.update_wrapper(reading, read)


@_kept_reading
def _opener(node: Macro) -> tuple[str, bool, str] | None:
    """`(name, keep_whitespace, rest)` when the node may open a scoped block."""
    head = _head(node)
    if head is None:
        return None
    match = _SCOPE_NAME.match(head)
    if match is None or match.group(2).startswith("/") and match.group(2) != "//":
        return None
    name = match.group(2)
    if name in ("else", "///"):
        return None
    if name == "//" and (head[match.end():].strip() or len(node.body) > 1):
        return None  # `{{// a comment}}` is complete in itself
    return name.lower() if name != "//" else name, match.group(1) == "#", head[match.end():]


_CLOSE = re.compile(r"\{\{\s*(/(?://|[A-Za-z_][A-Za-z0-9_]*))\s*\}\}", re.IGNORECASE)


def _closers(source: str) -> frozenset[str]:
    """Every block closer (`/name`, lowercased; `///`) written in `source`: a block whose
    closer is not among them cannot close, and is not looked for. A closer is a macro whose
    whole body is its name, so its text is there as written (an escaped brace is no brace).
    Kept for the texts `parsed` keeps, and for the last longer one."""
    if len(source) <= KEPT_TEXT_CHARS:
        return _kept_closers(source)
    last = _LAST_CLOSERS[0]
    if last[0] is not source:
        last = _LAST_CLOSERS[0] = (source, _find_closers(source))
    return last[1]


def _find_closers(source: str) -> frozenset[str]:
    return frozenset(match.group(1).lower() for match in _CLOSE.finditer(source))


_kept_closers = functools.lru_cache(maxsize=KEPT_TEXTS)(_find_closers)
_LAST_CLOSERS: list[tuple[str | None, frozenset[str]]] = [(None, frozenset())]
"""The last long text's closers, in one slot replaced whole (safe across threads)."""


def _closer(nodes: list[Node] | tuple[Node, ...], start: int, name: str) -> int | None:
    """Index of the sibling closing a block opened just before `start` (nesting counted)."""
    close = "///" if name == "//" else "/" + name
    level = 0
    for j in range(start, len(nodes)):
        node = nodes[j]
        if not isinstance(node, Macro) or len(node.body) != 1:
            if isinstance(node, Macro) and name != "//":
                opener = _opener(node)
                if opener is not None and opener[0] == name:
                    level += 1
            continue
        head = (_head(node) or "").strip()
        if head.lower() == close.lower():
            if level == 0:
                return j
            level -= 1
        elif name != "//":
            opener = _opener(node)
            if opener is not None and opener[0] == name:
                level += 1
    return None


def _split_else(body: list[Node]) -> tuple[list[Node], list[Node]]:
    """The `then` and `else` parts of an if-block (an `{{else}}` of a nested if stays in it)."""
    level = 0
    for j, node in enumerate(body):
        if not isinstance(node, Macro):
            continue
        head = (_head(node) or "").strip().lower()
        if len(node.body) == 1 and head == "/if":
            level -= 1
        elif head == "else" and len(node.body) == 1 and level == 0:
            return body[:j], body[j + 1:]
        else:
            opener = _opener(node)
            if opener is not None and opener[0] == "if":
                level += 1
    return body, []


def _unflagged(node: Macro) -> Macro:
    """The node without a leading `#` flag (`{{#if x}}` reads as `{{if x}}`)."""
    head = _head(node)
    if head is None or not head.lstrip().startswith("#"):
        return node
    stripped = head.lstrip()[1:]
    return Macro((Text(stripped), *node.body[1:]), node.raw, node.start)


def _dedent(text: str) -> str:
    """A block's body as SillyTavern gives it: common indentation removed, then trimmed."""
    return textwrap.dedent(text).strip()


@_kept_reading
def _var_call(node: Macro) -> tuple[str, str] | None:
    if len(node.body) != 1:
        return None
    match = _VAR.fullmatch((_head(node) or "").strip())
    return (match.group(1), match.group(2)) if match else None


@_kept_reading
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
