"""The prompt a tour assembles: ordered elements with stable ids, changed only through methods.

Must not: count tokens, fit the budget or know any stage's rules; it records every change
(add, remove, change, move) so the host computes the change log (R2.15, R3.6).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

Content = str | list[dict[str, Any]]

# Kinds of elements; context shifting decides by kind what may go and in which order.
KINDS = (
    "system", "card", "persona", "examples", "lore", "memory", "retrieval", "history",
    "authors_note", "input", "post_history", "tool", "prefill", "other",
)

_COMPARED = ("role", "content", "protected", "name", "tool_calls", "tool_call_id", "kind")


@dataclass(slots=True)
class Element:
    """One piece of the prompt. `id` is stable across tours (e.g. `history:<message id>`)."""

    id: str
    role: str
    content: Content
    source: str
    kind: str = "other"
    protected: bool = False
    tokens: int | None = None
    priority: int = 0
    """Within lore and retrieval: lower is removed first by context shifting."""
    group: str | None = None
    """Elements sharing a group leave together (a tool call and its results)."""
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text of the content (image parts left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-format message this element becomes in chat mode."""
        msg: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name:
            msg["name"] = self.name
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        return msg

    def to_dict(self) -> dict[str, Any]:
        """The plain dict shape plugins see (R12.6): at least id, role, content, protected."""
        return {
            "id": self.id,
            "role": self.role,
            # text is immutable: only parts (a list of dicts) need a copy of their own
            "content": self.content if isinstance(self.content, str)
            else copy.deepcopy(self.content),
            "protected": self.protected,
            "source": self.source,
            "kind": self.kind,
            "tokens": self.tokens,
            "name": self.name,
            "tool_calls": None if self.tool_calls is None else copy.deepcopy(self.tool_calls),
            "tool_call_id": self.tool_call_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, base: Element | None = None) -> Element:
        """Rebuild an element from a plugin's dict, keeping host-only fields of `base`."""
        el = copy.copy(base) if base is not None else cls(
            id=str(d["id"]), role="system", content="", source=str(d.get("source") or "plugin")
        )
        el.role = str(d.get("role", el.role))
        el.content = d.get("content", el.content)
        el.name = d.get("name", el.name)
        el.tool_calls = d.get("tool_calls", el.tool_calls)
        el.tool_call_id = d.get("tool_call_id", el.tool_call_id)
        if base is None:
            el.kind = str(d.get("kind") or "other")
            el.source = str(d.get("source") or "plugin")
            priority = d.get("priority")
            if isinstance(priority, int) and not isinstance(priority, bool):
                el.priority = priority  # lower leaves first when the budget is short
        elif el.content != base.content:
            el.tokens = None
        return el


def _snapshot(el: Element) -> dict[str, Any]:
    return {k: getattr(el, k) for k in _COMPARED}


@dataclass(slots=True)
class PromptChange:
    op: str  # "add" | "remove" | "change" | "move"
    id: str
    before: dict[str, Any] | None = None
    """The element as it was and became: for a `change` only (an added or removed
    element is named by its id in the change log)."""
    after: dict[str, Any] | None = None
    reason: str | None = None


class Prompt:
    """An ordered list of elements; every change goes through a method and is recorded."""

    def __init__(self, elements: Iterable[Element] = ()) -> None:
        self._elements: list[Element] = []
        self._ids: set[str] = set()
        self._changes: list[PromptChange] = []
        for el in elements:
            self.append(el)

    # reading
    def __iter__(self) -> Iterator[Element]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __contains__(self, element_id: object) -> bool:
        return element_id in self._ids

    @property
    def elements(self) -> tuple[Element, ...]:
        return tuple(self._elements)

    def get(self, element_id: str) -> Element | None:
        for el in self._elements:
            if el.id == element_id:
                return el
        return None

    def index(self, element_id: str) -> int:
        for i, el in enumerate(self._elements):
            if el.id == element_id:
                return i
        raise KeyError(element_id)

    def of_kind(self, *kinds: str) -> list[Element]:
        return [el for el in self._elements if el.kind in kinds]

    def messages(self) -> list[dict[str, Any]]:
        return [el.to_message() for el in self._elements]

    # changing
    def _unique(self, el: Element) -> Element:
        if el.id in self._ids:
            raise ValueError(f"duplicate prompt element id {el.id!r}")
        self._ids.add(el.id)
        return el

    def append(self, el: Element) -> Element:
        self.extend((el,))
        return el

    def extend(self, elements: Iterable[Element]) -> None:
        """`append` each of `elements` in order (a history of hundreds: one call)."""
        ids, mine, changes = self._ids, self._elements, self._changes
        for el in elements:
            if el.id in ids:
                raise ValueError(f"duplicate prompt element id {el.id!r}")
            ids.add(el.id)
            mine.append(el)
            changes.append(PromptChange("add", el.id))

    def insert(self, index: int, el: Element) -> Element:
        self._elements.insert(index, self._unique(el))
        self._changes.append(PromptChange("add", el.id))
        return el

    def insert_before(self, anchor_id: str, el: Element) -> Element:
        return self.insert(self.index(anchor_id), el)

    def insert_after(self, anchor_id: str, el: Element) -> Element:
        return self.insert(self.index(anchor_id) + 1, el)

    def insert_at_depth(self, depth: int, el: Element) -> Element:
        """Insert `depth` history messages from the end of the history (0 = after the last)."""
        return self.insert(self.depth_index(depth), el)

    def depth_index(self, depth: int) -> int:
        """Where `insert_at_depth` puts an element: before the `depth`-th history message
        from the end (after the last for 0, before the first when the history is shorter)."""
        positions = [i for i, e in enumerate(self._elements) if e.kind in ("history", "input")]
        if not positions:
            return len(self._elements)
        if depth <= 0:
            return positions[-1] + 1
        if depth >= len(positions):
            return positions[0]
        return positions[-depth]

    def remove(self, element_id: str, *, reason: str | None = None) -> Element:
        i = self.index(element_id)
        el = self._elements.pop(i)
        self._ids.discard(el.id)
        self._changes.append(PromptChange("remove", el.id, reason=reason))
        return el

    def set_content(self, element_id: str, content: Content) -> None:
        el = self._elements[self.index(element_id)]
        if el.content == content:
            return
        before = _snapshot(el)
        el.content = content
        el.tokens = None
        self._changes.append(PromptChange("change", el.id, before=before, after=_snapshot(el)))

    def replace_all(self, new: Sequence[Element], *, reason: str | None = None) -> None:
        """Take a whole new list (an interceptor's accepted result), recording the difference."""
        old = {el.id: el for el in self._elements}
        new_ids = {el.id for el in new}
        for el in self._elements:
            if el.id not in new_ids:
                self._changes.append(PromptChange("remove", el.id, reason=reason))
        for el in new:
            prev = old.get(el.id)
            if prev is None:
                self._changes.append(PromptChange("add", el.id))
            elif _snapshot(prev) != _snapshot(el):
                self._changes.append(
                    PromptChange("change", el.id, before=_snapshot(prev), after=_snapshot(el))
                )
        old_order = [el.id for el in self._elements if el.id in new_ids]
        new_order = [el.id for el in new if el.id in old]
        if old_order != new_order:
            self._changes.append(PromptChange("move", "*", reason=reason))
        self._elements = list(new)
        self._ids = {el.id for el in self._elements}

    # change recording
    def take_changes(self) -> list[PromptChange]:
        """The changes since the last call (the runner attributes them to a stage)."""
        changes, self._changes = self._changes, []
        return changes

    def copy(self) -> Prompt:
        """An independent deep copy, changes not carried over."""
        p = Prompt()
        p._elements = [copy.deepcopy(el) for el in self._elements]
        p._ids = set(self._ids)
        return p
