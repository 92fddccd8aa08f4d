"""The host-computed change log of a tour (R2.15, R3.6): element diffs by id, one record per actor.

Must not: trust what a plugin says it changed (changes are computed here from snapshots) or
keep whole prompts in the compact form (long texts are cut, with a marker, in `to_json`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TEXT_LIMIT = 4096
"""Longest string kept in `to_json()`; longer ones are cut and end with a marker."""


@dataclass(slots=True)
class ElementChanges:
    """What differs between two element lists, by element id."""

    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    """Entries `{"id", "before": {field: value}, "after": {field: value}}` (differing fields only)."""
    moved: list[str] = field(default_factory=list)
    """Ids of kept elements whose place relative to the other kept elements changed."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed or self.moved)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.added:
            out["added"] = [_cut(e) for e in self.added]
        if self.removed:
            out["removed"] = [_cut(e) for e in self.removed]
        if self.changed:
            out["changed"] = [_cut(c) for c in self.changed]
        if self.moved:
            out["moved"] = list(self.moved)
        return out


def diff_elements(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> ElementChanges:
    """Compare two element lists by `id`: added, removed, changed fields, and moved ids.

    Elements without an id are compared by position as `#<index>`. Cost is linear in the
    number of elements plus O(k log k) for the order check.
    """
    changes = ElementChanges()
    if len(before) == len(after) and all(b is a or b == a for b, a in zip(before, after)):
        return changes
    old = {_key(e, i): e for i, e in enumerate(before)}
    new_keys = [_key(e, i) for i, e in enumerate(after)]
    new_set = set(new_keys)
    for k, e in old.items():
        if k not in new_set:
            changes.removed.append(dict(e))
    kept_positions: list[int] = []
    kept_ids: list[str] = []
    old_index = {k: i for i, k in enumerate(old)}
    for k, e in zip(new_keys, after):
        prev = old.get(k)
        if prev is None:
            changes.added.append(dict(e))
            continue
        kept_positions.append(old_index[k])
        kept_ids.append(k)
        if prev is not e and prev != e:
            b: dict[str, Any] = {}
            a: dict[str, Any] = {}
            for f in prev.keys() | e.keys():
                pv, av = prev.get(f), e.get(f)
                if pv != av:
                    b[f], a[f] = pv, av
            if b or a:
                changes.changed.append({"id": k, "before": b, "after": a})
    changes.moved = _moved(kept_positions, kept_ids)
    return changes


def _key(e: Mapping[str, Any], i: int) -> str:
    k = e.get("id")
    return str(k) if k is not None else f"#{i}"


def _moved(positions: list[int], ids: list[str]) -> list[str]:
    """Ids outside one longest increasing run of old positions: the fewest that moved."""
    if all(positions[i] < positions[i + 1] for i in range(len(positions) - 1)):
        return []
    tails: list[int] = []
    tails_at: list[int] = []
    parent = [-1] * len(positions)
    for i, p in enumerate(positions):
        j = bisect_left(tails, p)
        if j == len(tails):
            tails.append(p)
            tails_at.append(i)
        else:
            tails[j] = p
            tails_at[j] = i
        parent[i] = tails_at[j - 1] if j else -1
    keep: set[int] = set()
    i = tails_at[-1] if tails_at else -1
    while i != -1:
        keep.add(i)
        i = parent[i]
    return [ids[i] for i in range(len(ids)) if i not in keep]


@dataclass(slots=True)
class ChangeRecord:
    """One entry of the change log: what one stage or one plugin hook did, or why it did not."""

    stage: str
    actor: str
    """`"stage"`, `"stage:<part>"` (e.g. `stage:budget`) or `"plugin:<name>.<hook>"`."""
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Hooks that did not run or whose changes were discarded: `{"hook", "reason"}`."""
    order: list[str] = field(default_factory=list)
    """The resolved hook order of the stage (`plugin.hook`), on the stage's summary record."""
    duration_ms: float | None = None
    outcome: str | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_changes(cls, stage: str, actor: str, changes: ElementChanges | None, **kw: Any) -> ChangeRecord:
        if changes is None:
            return cls(stage, actor, **kw)
        return cls(stage, actor, changes.added, changes.removed, changes.changed, changes.moved, **kw)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "actor": self.actor}
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if self.reason:
            out["reason"] = _cut(self.reason)
        for name in ("added", "removed", "changed"):
            items = getattr(self, name)
            if items:
                out[name] = [_cut(x) for x in items]
        if self.moved:
            out["moved"] = list(self.moved)
        if self.skipped:
            out["skipped"] = [dict(s) for s in self.skipped]
        if self.order:
            out["order"] = list(self.order)
        if self.duration_ms is not None:
            out["duration_ms"] = round(self.duration_ms, 3)
        if self.extra:
            out.update(_cut(self.extra))
        return out


class ChangeLog:
    """The ordered records of one tour; stages and the plugin dispatcher append to it."""

    __slots__ = ("records",)

    def __init__(self, records: Iterable[ChangeRecord] = ()) -> None:
        self.records: list[ChangeRecord] = list(records)

    def append(self, record: ChangeRecord) -> ChangeRecord:
        self.records.append(record)
        return record

    def record(self, stage: str, actor: str, before: Sequence[Mapping[str, Any]],
               after: Sequence[Mapping[str, Any]], **kw: Any) -> ChangeRecord:
        """Diff two snapshots and append the result as one record."""
        return self.append(ChangeRecord.from_changes(stage, actor, diff_elements(before, after), **kw))

    def for_stage(self, stage: str) -> list[ChangeRecord]:
        return [r for r in self.records if r.stage == stage]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[ChangeRecord]:
        return iter(self.records)

    def to_json(self) -> list[dict[str, Any]]:
        """A compact, JSON-serialisable list; strings over TEXT_LIMIT chars are cut with a marker."""
        return [r.to_json() for r in self.records]


def _cut(value: Any) -> Any:
    """Copy `value` for JSON, cutting long strings: `<first TEXT_LIMIT chars>…[cut N chars]`."""
    if isinstance(value, str):
        if len(value) <= TEXT_LIMIT:
            return value
        return f"{value[:TEXT_LIMIT]}…[cut {len(value) - TEXT_LIMIT} chars]"
    if isinstance(value, Mapping):
        return {str(k): _cut(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cut(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _cut(repr(value))
