"""Parse text into literal runs and `{{…}}` macro nodes (nested), in linear time.

Must not: evaluate anything or know macro names beyond the legacy `<USER>`-style markers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

MAX_DEPTH = 64
"""Nesting deeper than this is kept as literal text (bounds the evaluator's recursion)."""
KEPT_TEXT_CHARS = 8192
KEPT_TEXTS = 128
"""`parsed` keeps the nodes of the last `KEPT_TEXTS` texts of at most `KEPT_TEXT_CHARS`
characters: every tour evaluates the same card, preset and lorebook texts as the tour
before it (a few MB at most; a longer text is parsed each time)."""

LEGACY_MARKERS = {
    "<user>": "user",
    "<bot>": "char",
    "<char>": "char",
    "<group>": "group",
    "<charifnotgroup>": "charIfNotGroup",
}

# `{{` is the last two braces of a run (`{{{user}}}` → "{" + macro + "}"); `}}` the first two.
_TOKEN = re.compile(
    r"\\[{}]|\{\{(?!\{)|\}\}|<(?:user|bot|char|group|charifnotgroup)>", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Text:
    value: str


@dataclass(frozen=True, slots=True)
class Macro:
    """A `{{…}}` call: `body` is what lies between the braces, `raw` the exact source."""

    body: tuple[Text | Macro, ...]
    raw: str
    start: int
    legacy_name: str | None = None


Node = Text | Macro


@dataclass
class _Frame:
    start: int
    nodes: list[Node]
    buf: list[str]

    def flush(self) -> None:
        if self.buf:
            self.nodes.append(Text("".join(self.buf)))
            self.buf.clear()


def parsed(source: str) -> tuple[Node, ...] | list[Node]:
    """`parse(source)`, kept for a text seen lately (the nodes are immutable, so the same
    text shares them)."""
    return _kept(source) if len(source) <= KEPT_TEXT_CHARS else parse(source)


@functools.lru_cache(maxsize=KEPT_TEXTS)
def _kept(source: str) -> tuple[Node, ...]:
    return tuple(parse(source))


def parse(source: str) -> list[Node]:
    """Split `source` into nodes. Unclosed `{{` and stray `}}` stay literal text.

    `\\{` and `\\}` are escapes for a literal brace (the backslash is dropped).
    """
    root = _Frame(0, [], [])
    stack: list[_Frame] = [root]
    pos = 0
    for match in _TOKEN.finditer(source):
        token = match.group(0)
        top = stack[-1]
        if match.start() > pos:
            top.buf.append(source[pos : match.start()])
        pos = match.end()
        if token[0] == "\\":
            top.buf.append(token[1])
        elif token == "{{":
            if len(stack) > MAX_DEPTH:
                top.buf.append(token)
                continue
            top.flush()
            stack.append(_Frame(match.start(), [], []))
        elif token == "}}":
            if len(stack) == 1:
                top.buf.append(token)
                continue
            frame = stack.pop()
            frame.flush()
            parent = stack[-1]
            parent.flush()
            parent.nodes.append(
                Macro(tuple(frame.nodes), source[frame.start : pos], frame.start)
            )
        else:
            top.flush()
            top.nodes.append(
                Macro((), token, match.start(), legacy_name=LEGACY_MARKERS[token.lower()])
            )
    if pos < len(source):
        stack[-1].buf.append(source[pos:])
    # unclosed frames: their `{{` is literal; their content joins the parent
    while len(stack) > 1:
        frame = stack.pop()
        parent = stack[-1]
        parent.buf.append("{{")
        for node in frame.nodes:
            if isinstance(node, Text):
                parent.buf.append(node.value)
            else:
                parent.flush()
                parent.nodes.append(node)
        parent.buf.extend(frame.buf)
    root.flush()
    return _merge_text(root.nodes)


def _merge_text(nodes: list[Node]) -> list[Node]:
    merged: list[Node] = []
    for node in nodes:
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].value + node.value)
        else:
            merged.append(node)
    return merged


def split_args(body: tuple[Node, ...]) -> list[list[Node]]:
    """Split a macro body at top-level `::` (only in literal text, never inside nested calls)."""
    segments: list[list[Node]] = [[]]
    for node in body:
        if isinstance(node, Macro):
            segments[-1].append(node)
            continue
        parts = node.value.split("::")
        for i, part in enumerate(parts):
            if i:
                segments.append([])
            if part:
                segments[-1].append(Text(part))
    return segments
