"""Context fitting (R2.7): choose which prompt elements stay within the token budget.

Must not: count tokens (items arrive counted), touch storage (the caller persists the
`FitAnchor` per chat), or ever remove protected content or split a group.

Removal order: oldest history (whole groups, in chunks down to a low-water mark so the kept
prefix stays byte-identical for several turns), then lorebook entries by priority, then
retrieval results, then example dialogues, then elements a plugin added (each kind lowest
priority first). Everything else is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evacore.errors import ContextOverflow

Kind = Literal[
    "system", "card", "persona", "examples", "lore", "memory", "retrieval", "history",
    "authors_note", "input", "post_history", "plugin", "other",
]
REMOVABLE_ORDER: tuple[str, ...] = ("lore", "retrieval", "examples", "plugin")
"""After history, these kinds are removed in this order (`plugin`: what a plugin added)."""
DEFAULT_CHUNK = 0.3
"""History is cut down to `budget − chunk` (70% of the budget by default)."""


@dataclass(slots=True)
class FitItem:
    """One counted prompt element (not frozen: one is made per element on every tour that
    has to fit, and a frozen dataclass takes twice as long to make; `fit` never changes
    one)."""

    id: str
    tokens: int
    kind: Kind
    protected: bool = False
    group: str | None = None
    """Items sharing a group (a tool call and its results) stay or leave together."""
    order: int = 0
    """Position in the prompt."""
    priority: int = 0
    """Lower is removed first (lore, retrieval, examples)."""
    history_index: int | None = None
    """Position in the chat, 0 = oldest (history only)."""


@dataclass(frozen=True, slots=True)
class FitAnchor:
    """The persisted window start: history before `window_start` stays out of the prompt."""

    window_start: int | None = None
    """history_index of the first kept history item after the last cut; None = no cut."""

    def to_dict(self) -> dict[str, Any]:
        return {"window_start": self.window_start}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FitAnchor:
        value = (data or {}).get("window_start")
        return cls(window_start=int(value) if value is not None else None)


@dataclass(frozen=True, slots=True)
class Removed:
    id: str
    kind: str
    tokens: int
    reason: str
    """`window` (before the persisted window start), `history` (cut this turn),
    `lore`, `retrieval`, `examples` or `plugin` (removed to fit, lowest priority first)."""


@dataclass(frozen=True, slots=True)
class FitResult:
    kept_ids: list[str]
    """In prompt order."""
    removed: list[Removed]
    """In removal order."""
    total_tokens: int
    anchor: FitAnchor
    budget: int
    fixed_tokens: int = 0
    """Tokens that can never be removed (protected items, and kinds fitting never cuts)."""
    cut: bool = False
    """True when the history window moved forward this turn (one prompt-cache miss)."""


@dataclass
class _Unit:
    """What is removed at once: one item, or a whole group."""

    items: list[FitItem]
    tokens: int
    kind: str
    fixed: bool
    priority: int
    order: int
    index: int  # history index (history units), else -1
    removed: str | None = field(default=None)


def _one(item: FitItem) -> _Unit:
    """The usual unit: one item (its fields as they are)."""
    kind = item.kind
    history = kind == "history"
    return _Unit([item], item.tokens, kind,
                 not (history or kind in REMOVABLE_ORDER) or bool(item.protected),
                 item.priority, item.order,
                 (item.order if item.history_index is None else item.history_index)
                 if history else -1)


def _units(items: Sequence[FitItem]) -> list[_Unit]:
    grouped: dict[str, list[FitItem]] = {}
    units: list[_Unit] = []
    singles: list[FitItem] = []
    for item in items:
        if item.tokens < 0:
            raise ValueError(f"negative token count for {item.id}")
        if item.group is None:
            singles.append(item)
        else:
            grouped.setdefault(item.group, []).append(item)
    units.extend(_one(single) for single in singles)
    for members in grouped.values():
        if len(members) == 1:  # a group of one (most history messages) is a single item
            units.append(_one(members[0]))
            continue
        history = [m for m in members if m.kind == "history"]
        kind = "history" if history else members[0].kind
        removable = kind == "history" or kind in REMOVABLE_ORDER
        indexes = [m.history_index if m.history_index is not None else m.order for m in history]
        units.append(_Unit(
            items=members,
            tokens=sum(m.tokens for m in members),
            kind=kind,
            fixed=not removable or any(m.protected for m in members),
            priority=min(m.priority for m in members),
            order=max(m.order for m in members),
            index=min(indexes) if indexes else -1,
        ))
    return units


def _chunk_tokens(chunk: float, budget: int) -> int:
    if isinstance(chunk, float) and 0 <= chunk < 1:
        return int(budget * chunk)
    return max(0, int(chunk))


def fit(
    items: Sequence[FitItem],
    budget: int,
    *,
    chunk: float = DEFAULT_CHUNK,
    anchor: FitAnchor | None = None,
) -> FitResult:
    """Keep the items that fit `budget`; see the module docstring for the order.

    `chunk` is the headroom left after a history cut: tokens (int) or a fraction of the
    budget (float below 1). `anchor` is the previous result's anchor for this chat.
    Raises `ContextOverflow` when the fixed content alone exceeds the budget.
    """
    units = _units(items)
    fixed = sum(u.tokens for u in units if u.fixed)
    if fixed > budget:
        protected = sum(i.tokens for i in items if i.protected)
        raise ContextOverflow(
            f"protected content needs {fixed} tokens but the budget is {budget} "
            f"({protected} in protected items, {fixed - protected} in other fixed elements)",
            protected_tokens=protected, fixed_tokens=fixed, budget=budget,
        )
    headroom = _chunk_tokens(chunk, budget)
    total = sum(u.tokens for u in units)
    removed: list[Removed] = []

    def record(unit: _Unit) -> None:
        for member in sorted(unit.items, key=lambda m: m.order):
            removed.append(Removed(member.id, member.kind, member.tokens, str(unit.removed)))

    def drop(unit: _Unit, reason: str) -> None:
        nonlocal total
        unit.removed = reason
        total -= unit.tokens
        record(unit)

    history = sorted((u for u in units if u.kind == "history" and not u.fixed),
                     key=lambda u: u.index)
    start = anchor.window_start if anchor is not None else None
    if start is not None:
        window = [u for u in history if u.index < start]
        for unit in window:
            unit.removed = "window"
            total -= unit.tokens
        start, total = _readd(history, total, budget, headroom, start)
        for unit in window:
            if unit.removed == "window":
                record(unit)
    cut = False
    if total > budget:
        floor = total - sum(u.tokens for u in history if u.removed is None)
        target = budget - min(headroom, max(0, budget - floor) // 2)
        for unit in history:
            if total <= target:
                break
            if unit.removed is None:
                drop(unit, "history")
                cut = True
    for kind in REMOVABLE_ORDER:
        if total <= budget:
            break
        candidates = sorted((u for u in units if u.kind == kind and not u.fixed),
                            key=lambda u: (u.priority, -u.order))
        for unit in candidates:
            if total <= budget:
                break
            drop(unit, kind)
    kept_history = [u for u in history if u.removed is None]
    if cut or start is not None:
        start = kept_history[0].index if kept_history else _after_last(history, start)
    kept = sorted((i for u in units if u.removed is None for i in u.items),
                  key=lambda i: i.order)
    return FitResult(
        kept_ids=[i.id for i in kept],
        removed=removed,
        total_tokens=total,
        anchor=FitAnchor(start),
        budget=budget,
        fixed_tokens=fixed,
        cut=cut,
    )


def _readd(
    history: list[_Unit], total: int, budget: int, headroom: int, start: int
) -> tuple[int, int]:
    """Bring dropped older history back only when a whole chunk of room is free, and only
    as far as the low-water mark (one cache miss, then a stable prefix again)."""
    low_water = budget - headroom
    if low_water - total < headroom or headroom == 0:
        return start, total
    for unit in reversed(history):
        if unit.removed != "window":
            continue
        if total + unit.tokens > low_water:
            break
        unit.removed = None
        total += unit.tokens
        start = unit.index
    return start, total


def _after_last(history: list[_Unit], start: int | None) -> int | None:
    """Window start when every removable history unit is out: just past the newest one."""
    if not history:
        return start
    return max(u.index for u in history) + 1
