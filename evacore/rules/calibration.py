"""Seeding and calibration waves as a pure plan (R6.10): which seeded rules to create, which
untouched ones to rewrite, which to leave, and the new seed meta.

Must not: write anything or read the clock behind the caller's back (`now` is a parameter);
the store applies the plan in one transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from evacore.rules.model import Rule, content_hash
from evacore.rules.seeds import SEED_VERSION, SEEDS

SEED_META_KEY = "stream_rules"
"""The `seed_meta` row (key) that holds the plan's `new_meta`."""

WAVES_KEPT = 50
"""How many wave records the seed meta keeps (the oldest are dropped)."""

EDIT_SLACK = timedelta(seconds=5)
"""`updated_at` this much past the seeding time still counts as the seeding's own write
(clock rounding between the core and the database)."""


@dataclass(frozen=True)
class StoredRuleState:
    """What calibration needs to know about one stored rule."""

    name: str
    enabled: bool
    seed_hash: str | None
    seed_version: int | None
    current_hash: str
    """`content_hash` of the rule's fields as stored now."""
    updated_at: datetime | None = None
    created_at: datetime | None = None

    @classmethod
    def from_rule(cls, rule: Rule) -> StoredRuleState:
        return cls(
            name=rule.name,
            enabled=rule.enabled,
            seed_hash=rule.seed_hash,
            seed_version=rule.seed_version,
            current_hash=content_hash(rule),
            updated_at=rule.updated_at,
            created_at=rule.created_at,
        )


@dataclass(frozen=True)
class Left:
    """A seeded name the wave does not write, and why: `current` (already this seed),
    `edited`, `disabled`, `deleted`, or `not_seeded` (the master's own rule holds the name)."""

    name: str
    reason: str


@dataclass(frozen=True)
class SeedPlan:
    create: tuple[Rule, ...]
    """New rows (timestamps, seed_version and seed_hash set)."""
    rewrite: tuple[Rule, ...]
    """Full replacements of untouched seeded rows, matched by name (created_at kept)."""
    leave: tuple[Left, ...]
    new_meta: dict[str, Any]
    """Store it under SEED_META_KEY (when `meta_changed`)."""
    meta_changed: bool

    @property
    def changed(self) -> bool:
        """Whether applying the plan writes anything."""
        return bool(self.create or self.rewrite or self.meta_changed)


def plan_seeding(
    stored: Iterable[StoredRuleState],
    seed_meta: Mapping[str, Any] | None,
    seeds: Iterable[Rule] = SEEDS,
    *,
    now: datetime | None = None,
    version: int = SEED_VERSION,
) -> SeedPlan:
    """The wave for this release. `seed_meta` is what the last wave stored (None or {} for a
    new database): {"version": int, "rules": {name: {"hash", "version", "at"}}, "waves": [...]},
    one entry per seeded name ever written, so a deleted seeded rule is never created again, and
    one record per wave that wrote something. An untouched row already holding this seed's
    fields but an older `seed_version` is rewritten too, so every untouched seeded rule carries
    the version of the release it is current with."""
    stamp = now or datetime.now(UTC)
    old_entries: dict[str, dict[str, Any]] = dict((seed_meta or {}).get("rules") or {})
    entries = {name: dict(entry) for name, entry in old_entries.items()}
    rows = {state.name: state for state in stored}
    create: list[Rule] = []
    rewrite: list[Rule] = []
    leave: list[Left] = []
    for seed in seeds:
        seed_hash = seed.seed_hash or content_hash(seed)
        fresh = dataclasses.replace(
            seed,
            seed_hash=seed_hash,
            seed_version=seed.seed_version or version,
            created_at=stamp,
            updated_at=stamp,
            enabled=True,
        )
        entry = {"hash": seed_hash, "version": fresh.seed_version, "at": stamp.isoformat()}
        row = rows.get(seed.name)
        known = old_entries.get(seed.name)
        if row is None:
            if known is None:
                create.append(fresh)
                entries[seed.name] = entry
            else:
                leave.append(Left(seed.name, "deleted"))
            continue
        if row.seed_hash is None:
            leave.append(Left(seed.name, "not_seeded"))
            entries.setdefault(seed.name, {"hash": None, "version": None, "at": stamp.isoformat()})
            continue
        reason = _touched(row, known)
        if reason is not None:
            leave.append(Left(seed.name, reason))
        elif row.seed_hash == seed_hash and (row.seed_version or 0) >= (fresh.seed_version or 0):
            leave.append(Left(seed.name, "current"))
        else:
            rewrite.append(dataclasses.replace(fresh, created_at=row.created_at or stamp))
            entries[seed.name] = entry
            continue
        if known is None:  # a seeded row the meta lost: remember it from now on
            entries[seed.name] = {
                "hash": row.seed_hash,
                "version": row.seed_version,
                "at": stamp.isoformat(),
            }
    new_meta = {
        "version": max(version, int((seed_meta or {}).get("version") or 0)),
        "rules": entries,
        "waves": list((seed_meta or {}).get("waves") or []),
    }
    if create or rewrite:
        new_meta["waves"] = [*new_meta["waves"], _wave_record(stamp, version, create, rewrite, leave)]
        new_meta["waves"] = new_meta["waves"][-WAVES_KEPT:]
    meta_changed = (
        entries != old_entries
        or (seed_meta or {}).get("version") != new_meta["version"]
        or new_meta["waves"] != list((seed_meta or {}).get("waves") or [])
    )
    return SeedPlan(tuple(create), tuple(rewrite), tuple(leave), new_meta, meta_changed)


def _wave_record(
    stamp: datetime, version: int, create: list[Rule], rewrite: list[Rule], leave: list[Left]
) -> dict[str, Any]:
    """What one wave did, kept in the seed meta: the database's own record of its waves."""
    return {
        "at": stamp.isoformat(),
        "version": version,
        "created": [rule.name for rule in create],
        "rewritten": [rule.name for rule in rewrite],
        "left": {left.name: left.reason for left in leave if left.reason != "current"},
    }


def _touched(row: StoredRuleState, known: Mapping[str, Any] | None) -> str | None:
    """Why the master's hand is on this seeded row, or None if it is as seeded."""
    if not row.enabled:
        return "disabled"
    if row.current_hash != row.seed_hash:
        return "edited"
    seeded_at = _parse(known.get("at")) if known else None
    if seeded_at is None or row.updated_at is None:
        return None
    return "edited" if _aware(row.updated_at) > seeded_at + EDIT_SLACK else None


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, str):
        try:
            return _aware(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _aware(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
