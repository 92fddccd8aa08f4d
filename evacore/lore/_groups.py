"""Inclusion groups: among the candidates of one scan pass, keep one entry per group
(sticky members first, then scoring, prioritised order, or a weighted draw).

Must not: touch budget or probability; it only removes candidates and says why.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence

from evacore.lore._index import ScanEntry

Remove = Callable[[int, str], None]


def _js_key_order(names: list[str]) -> list[str]:
    """Object keys iterate integer-like names first (ascending), then insertion order."""
    def is_index(name: str) -> bool:
        return name.isdigit() and (name == "0" or not name.startswith("0")) and int(name) < 2**32 - 1

    ints = sorted((n for n in names if is_index(n)), key=int)
    return ints + [n for n in names if not is_index(n)]


def filter_groups(
    candidates: list[int],
    entries: Sequence[ScanEntry],
    *,
    sticky: Collection[int],
    cooling: Collection[int],
    active_groups: Collection[str],
    global_scoring: bool,
    score: Callable[[int], int],
    rng: random.Random,
    removed: Remove,
) -> list[int]:
    """Return the candidates that survive; `removed(index, why)` is told about each loser."""
    grouped: dict[str, list[int]] = {}
    for idx in candidates:
        for name in entries[idx].groups:
            grouped.setdefault(name, []).append(idx)
    if not grouped:
        return candidates
    kept = list(candidates)

    def drop(idx: int, why: str) -> None:
        if idx in kept:
            kept.remove(idx)
            removed(idx, why)

    order = _js_key_order(list(grouped))
    settled: set[str] = set()
    for name in order:
        members = grouped[name]
        held = [m for m in members if m in sticky]
        if held:
            for m in members:
                if m not in held:
                    drop(m, f"group '{name}': a sticky member holds it")
            settled.add(name)
        for m in members:
            if m in cooling:
                drop(m, f"group '{name}': on cooldown or delay")

    for name in order:
        members = grouped[name]
        if name in settled:
            continue
        if not global_scoring and not any(entries[m].entry.use_group_scoring for m in members):
            continue
        scores = {m: score(m) for m in members}
        best = max(scores.values())
        for m in list(members):
            scored = entries[m].entry.use_group_scoring
            if (global_scoring if scored is None else scored) and scores[m] < best:
                drop(m, f"group '{name}': score {scores[m]} below {best}")
                members.remove(m)

    for name in order:
        members = grouped[name]
        if name in settled:
            continue
        if name in active_groups:
            for m in members:
                drop(m, f"group '{name}': already active from an earlier pass")
            continue
        if len(members) <= 1:
            continue
        prios = sorted(
            (m for m in members if entries[m].entry.group_override),
            key=lambda m: -entries[m].entry.order,
        )
        if prios:
            winner = prios[0]
            for m in members:
                if m != winner:
                    drop(m, f"group '{name}': prioritised entry {entries[winner].entry.uid} wins")
            continue
        weights = [entries[m].entry.group_weight for m in members]
        roll = rng.random() * sum(weights)
        running = 0.0
        winner = None
        for m, w in zip(members, weights):
            running += w
            if roll <= running:
                winner = m
                break
        if winner is None:
            continue
        for m in members:
            if m != winner:
                drop(m, f"group '{name}': weighted draw won by entry {entries[winner].entry.uid}")
    return kept
