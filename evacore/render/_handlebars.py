"""A small Handlebars subset for story strings: `{{x}}`, `{{#if}}`/`{{else}}`/`{{/if}}`, `{{#unless}}`.

Must not: evaluate anything but those forms. A mustache it does not know (a macro such as
`{{trim}}` or `{{random::a::b}}`) is left in the output verbatim for the macro pass,
the way SillyTavern forwards unknown helpers to its macro engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evacore.errors import InvalidInput

_TAG = re.compile(
    r"(?P<esc>\\)?\{\{(?P<lt>~)?"
    r"(?:!--(?P<lcomment>.*?)--(?P<rt1>~)?\}\}"
    r"|!(?P<comment>.*?)(?P<rt2>~)?\}\}"
    r"|\{(?P<triple>.*?)\}(?P<rt3>~)?\}\}"
    r"|(?P<body>.*?)(?P<rt4>~)?\}\})",
    re.DOTALL,
)
_PATH = re.compile(r"(?:this\.)?[A-Za-z_$][\w$-]*(?:\.[\w$-]+)*|this")
_BLOCK_ARG = re.compile(r"(?P<helper>if|unless)\s+(?P<arg>\S+)\s*")
_ELSE_IF = re.compile(r"else\s+(?P<helper>if|unless)\s+(?P<arg>\S+)\s*")
_MISSING = object()


@dataclass
class _Token:
    kind: str  # text | var | open | else | close | comment
    value: str = ""
    raw: str = ""
    helper: str = ""
    left_trim: bool = False
    right_trim: bool = False


@dataclass
class _If:
    helper: str
    arg: str
    then: list[Any] = field(default_factory=list)
    otherwise: list[Any] = field(default_factory=list)
    in_else: bool = False
    chained: bool = False
    """Opened by `{{else if}}`: closed together with the block it continues."""


def render(source: str, params: Mapping[str, Any]) -> str:
    """Render `source` with `params`; unknown mustaches stay verbatim."""
    nodes = _parse(_tokenize(source))
    out: list[str] = []
    _emit(nodes, params, out)
    return "".join(out)


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    for match in _TAG.finditer(source):
        if match.start() > position:
            tokens.append(_Token("text", source[position : match.start()]))
        position = match.end()
        raw = match.group(0)
        if match.group("esc"):
            tokens.append(_Token("text", raw[1:]))
            continue
        left = bool(match.group("lt"))
        right = bool(
            match.group("rt1") or match.group("rt2") or match.group("rt3") or match.group("rt4")
        )
        if match.group("lcomment") is not None or match.group("comment") is not None:
            tokens.append(_Token("comment", raw=raw, left_trim=left, right_trim=right))
            continue
        if match.group("triple") is not None:
            tokens.append(_Token("var", match.group("triple").strip(), raw, "", left, right))
            continue
        body = match.group("body").strip()
        tokens.append(_classify(body, raw, left, right))
    if position < len(source):
        tokens.append(_Token("text", source[position:]))
    _apply_whitespace_control(tokens)
    _apply_standalone_lines(tokens)
    return tokens


def _classify(body: str, raw: str, left: bool, right: bool) -> _Token:
    if body.startswith("#"):
        block = _BLOCK_ARG.fullmatch(body[1:].strip())
        if block is None:
            raise InvalidInput(f"story string: unsupported block {raw!r} (only #if and #unless)")
        return _Token("open", block.group("arg"), raw, block.group("helper"), left, right)
    if body.startswith("/"):
        return _Token("close", body[1:].strip(), raw, "", left, right)
    if body in ("else", "^"):
        return _Token("else", "", raw, "", left, right)
    chained = _ELSE_IF.fullmatch(body)
    if chained is not None:
        return _Token("else", chained.group("arg"), raw, chained.group("helper"), left, right)
    return _Token("var", body, raw, "", left, right)


def _apply_whitespace_control(tokens: list[_Token]) -> None:
    for index, token in enumerate(tokens):
        if token.kind == "text":
            continue
        if token.left_trim and index > 0 and tokens[index - 1].kind == "text":
            tokens[index - 1].value = tokens[index - 1].value.rstrip()
        if token.right_trim and index + 1 < len(tokens) and tokens[index + 1].kind == "text":
            tokens[index + 1].value = tokens[index + 1].value.lstrip()


def _apply_standalone_lines(tokens: list[_Token]) -> None:
    """A block tag alone on its line takes the line's indentation and newline with it."""
    last = len(tokens) - 1
    standalone: list[int] = []
    for index, token in enumerate(tokens):
        if token.kind not in ("open", "else", "close", "comment"):
            continue
        before = tokens[index - 1] if index > 0 else None
        after = tokens[index + 1] if index < last else None
        if before is not None:
            if before.kind != "text":
                continue
            _head, newline, tail = before.value.rpartition("\n")
            if tail.strip(" \t") or (not newline and index - 1 != 0):
                continue
        if after is not None:
            if after.kind != "text":
                continue
            line, newline, _rest = after.value.partition("\n")
            if line.strip(" \t\r") or (not newline and index + 1 != last):
                continue
        standalone.append(index)
    # Decided on the original text first, so neighbouring standalone tags see the same lines.
    for index in standalone:
        if index > 0:
            before = tokens[index - 1]
            head, newline, _tail = before.value.rpartition("\n")
            before.value = head + newline
        if index < last:
            after = tokens[index + 1]
            _line, newline, rest = after.value.partition("\n")
            after.value = rest if newline else ""


def _parse(tokens: list[_Token]) -> list[Any]:
    root: list[Any] = []
    stack: list[_If] = []

    def target() -> list[Any]:
        if not stack:
            return root
        top = stack[-1]
        return top.otherwise if top.in_else else top.then

    for token in tokens:
        if token.kind in ("text", "var"):
            target().append(token)
        elif token.kind == "open":
            block = _If(token.helper, token.value)
            target().append(block)
            stack.append(block)
        elif token.kind == "else":
            if not stack or stack[-1].in_else:
                raise InvalidInput(f"story string: {token.raw!r} outside an open #if block")
            stack[-1].in_else = True
            if token.helper:
                # `{{else if x}}` opens a nested block closed by the same `{{/if}}`.
                nested = _If(token.helper, token.value, chained=True)
                stack[-1].otherwise.append(nested)
                stack.append(nested)
        elif token.kind == "close":
            if not stack:
                raise InvalidInput(f"story string: {token.raw!r} closes nothing")
            while len(stack) > 1 and stack[-1].chained:
                stack.pop()
            block = stack.pop()
            if token.value != block.helper:
                raise InvalidInput(f"story string: {token.raw!r} closes a #{block.helper} block")
    if stack:
        raise InvalidInput(f"story string: #{stack[-1].helper} block is never closed")
    return root


def _lookup(params: Mapping[str, Any], path: str) -> Any:
    if path == "this":
        return params
    path = path.removeprefix("this.")
    value: Any = params
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _truthy(value: Any) -> bool:
    if value is _MISSING or value is None:
        return False
    if isinstance(value, Mapping):
        return True
    return bool(value)


def _to_text(value: Any) -> str:
    if value is None or value is _MISSING:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ",".join(_to_text(item) for item in value)
    return str(value)


def _emit(nodes: list[Any], params: Mapping[str, Any], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, _If):
            condition = (
                _truthy(_lookup(params, node.arg))
                if _PATH.fullmatch(node.arg)
                else (_literal_truthy(node.arg))
            )
            if node.helper == "unless":
                condition = not condition
            _emit(node.then if condition else node.otherwise, params, out)
        elif node.kind == "text":
            out.append(node.value)
        else:
            value = _lookup(params, node.value) if _PATH.fullmatch(node.value) else _MISSING
            out.append(node.raw if value is _MISSING else _to_text(value))


def _literal_truthy(arg: str) -> bool:
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'":
        return len(arg) > 2
    try:
        return float(arg) != 0
    except ValueError:
        return arg not in ("false", "null", "undefined")
