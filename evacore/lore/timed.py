"""Timed effects of lorebook entries (sticky, cooldown, delay), kept per chat (R2.4).

Must not: decide activation (scan.py does) or store anything; the state is returned to
the caller, who persists it with the chat.
Time is counted in chat messages: `turn` is the chat length at the scan (SillyTavern's
`chat.length`); a swipe or regeneration scans again at the same turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evacore.lore.model import LoreEntry


@dataclass(frozen=True)
class TimedRecord:
    """One running effect: `hash` identifies the entry version, active while start ≤ turn < end."""

    hash: str
    start: int
    end: int
    protected: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"hash": self.hash, "start": self.start, "end": self.end, "protected": self.protected}


@dataclass(frozen=True)
class TimedState:
    """Sticky and cooldown records keyed "<book name>.<uid>" (SillyTavern's
    `chat_metadata.timedWorldInfo`). JSON-serialisable through `to_json`/`from_json`."""

    sticky: Mapping[str, TimedRecord] = field(default_factory=dict)
    cooldown: Mapping[str, TimedRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "sticky": {k: v.to_json() for k, v in self.sticky.items()},
            "cooldown": {k: v.to_json() for k, v in self.cooldown.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes | None) -> TimedState:
        """Read our JSON or SillyTavern's `timedWorldInfo`; malformed records are dropped."""
        if data is None or data == "" or data == b"":
            return cls()
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError:
                return cls()
        if not isinstance(data, Mapping):
            return cls()
        return cls(sticky=_records(data.get("sticky")), cooldown=_records(data.get("cooldown")))


def _records(obj: object) -> dict[str, TimedRecord]:
    out: dict[str, TimedRecord] = {}
    if not isinstance(obj, Mapping):
        return out
    for key, value in obj.items():
        if not isinstance(value, Mapping):
            continue
        try:
            out[str(key)] = TimedRecord(
                hash=str(value.get("hash", "")),
                start=int(value.get("start", 0)),
                end=int(value.get("end", 0)),
                protected=bool(value.get("protected", False)),
            )
        except (TypeError, ValueError):
            continue
    return out


class TimedEntry(Protocol):
    key: str
    hash: str
    entry: LoreEntry


class TimedEffects:
    """Works out which entries are sticky, cooling down or delayed at this turn, then records
    the effects of the entries that activated."""

    def __init__(
        self,
        state: TimedState,
        entries: Sequence[TimedEntry],
        turn: int,
        *,
        dry_run: bool,
        with_delay: Iterable[int],
        find_hash: Callable[[str], int | None],
    ) -> None:
        self._entries = entries
        self._turn = turn
        self._dry_run = dry_run
        self._state = state
        self.sticky: set[int] = set()
        self.cooldown: set[int] = set()
        self.delay: set[int] = set()
        self.events: list[str] = []
        self._records: dict[str, dict[str, TimedRecord]] = {
            "sticky": dict(state.sticky), "cooldown": dict(state.cooldown),
        }
        if not dry_run:
            self._check("sticky", self.sticky, find_hash)
            self._check("cooldown", self.cooldown, find_hash)
        for index in with_delay:
            delay = entries[index].entry.delay
            if delay and turn < delay:
                self.delay.add(index)

    def _check(self, kind: str, active: set[int], find_hash: Callable[[str], int | None]) -> None:
        records = self._records[kind]
        for key, rec in list(records.items()):
            if self._turn <= rec.start and not rec.protected:
                del records[key]
                self.events.append(f"{kind} {key}: dropped, the chat did not advance")
                continue
            index = find_hash(rec.hash)
            if index is None:
                if self._turn >= rec.end:
                    del records[key]
                    self.events.append(f"{kind} {key}: dropped, entry gone and time passed")
                continue
            entry = self._entries[index].entry
            if not getattr(entry, kind):
                del records[key]
                self.events.append(f"{kind} {key}: dropped, entry no longer has {kind}")
                continue
            if self._turn >= rec.end:
                del records[key]
                self.events.append(f"{kind} {key}: ended")
                if kind == "sticky" and entry.cooldown:
                    item = self._entries[index]
                    self._records["cooldown"][item.key] = self._record(item, "cooldown", True)
                    self.cooldown.add(index)
                    self.events.append(f"cooldown {item.key}: started as the sticky ended")
                continue
            active.add(index)

    def _record(self, item: TimedEntry, kind: str, protected: bool) -> TimedRecord:
        span = int(getattr(item.entry, kind) or 0)
        return TimedRecord(hash=item.hash, start=self._turn, end=self._turn + span, protected=protected)

    def finish(self, activated: Iterable[int]) -> TimedState:
        """The state to persist: records created for newly activated sticky/cooldown entries."""
        if self._dry_run:
            return self._state
        for index in activated:
            item = self._entries[index]
            for kind in ("sticky", "cooldown"):
                if getattr(item.entry, kind) and item.key not in self._records[kind]:
                    self._records[kind][item.key] = self._record(item, kind, False)
        return TimedState(sticky=self._records["sticky"], cooldown=self._records["cooldown"])
