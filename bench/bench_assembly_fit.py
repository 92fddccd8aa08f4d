"""Benchmark context fitting: 1,000 vs 100,000 history messages when the caller streams
history newest-first through `select_history`, so the cost follows the kept messages.

Must not: count tokens or touch storage; items arrive counted, as stage 6 hands them over.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from evacore.shift import FitAnchor, FitItem, fit, select_history

BUDGET = 16_000
TARGET_MS = 5.0
"""p50 per fit (selection + fit) on a 100,000-message chat."""
TARGET_RATIO = 1.5
"""100k-message p50 over 1k-message p50: flat means O(kept), not O(history)."""


def _chat(n: int) -> list[FitItem]:
    """Message sizes repeat every 1,000 messages, so both chats end with the same newest
    messages and keep the same number of them."""
    rng = random.Random(1)
    sizes = [rng.randint(20, 450) for _ in range(1_000)]
    return [FitItem(f"history:{i}", sizes[i % 1_000], "history", order=100 + i,
                    history_index=i) for i in range(n)]


def _fixed(rng: random.Random) -> list[FitItem]:
    return [
        FitItem("system", 1200, "system", protected=True, order=0),
        FitItem("card.description", 800, "card", order=1),
        *[FitItem(f"lore:{i}", rng.randint(50, 300), "lore", priority=i, order=10 + i)
          for i in range(8)],
        FitItem("input", 120, "input", protected=True, order=10**9),
    ]


def _sample(history: list[FitItem], fixed: list[FitItem], anchor: FitAnchor | None,
            select: bool) -> tuple[float, FitAnchor]:
    start = time.perf_counter()
    room = BUDGET - sum(i.tokens for i in fixed)
    candidates = select_history(reversed(history), room, anchor) if select else history
    result = fit([*fixed, *candidates], BUDGET, anchor=anchor)
    return (time.perf_counter() - start) * 1000, result.anchor


def _interleaved(sizes: tuple[int, ...], repeats: int, select: bool
                 ) -> dict[int, tuple[float, int]]:
    """p50 ms and kept messages per chat size, the sizes' samples taken in turn (one of each
    per round), so that a change in the machine's speed falls on all of them alike."""
    fixed = _fixed(random.Random(2))
    chats = {n: _chat(n) for n in sizes}
    anchors: dict[int, FitAnchor | None] = {}
    for n in sizes:  # warm-up, sets each chat's window
        _, anchors[n] = _sample(chats[n], fixed, None, select)
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            elapsed, anchors[n] = _sample(chats[n], fixed, anchors[n], select)
            samples[n].append(elapsed)
    out = {}
    for n in sizes:
        kept = len(fit([*fixed, *select_history(reversed(chats[n]), BUDGET, anchors[n])],
                       BUDGET, anchor=anchors[n]).kept_ids) - len(fixed)
        out[n] = (statistics.median(samples[n]), kept)
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    """p50 ms of one fit with caller-side selection at 1k and 100k history messages (their
    samples interleaved), their ratio, and (for contrast) fitting all 100k messages without
    selection."""
    repeats = 30 if quick else 200
    both = _interleaved((1_000, 100_000), repeats, select=True)
    (small, kept_small), (large, kept_large) = both[1_000], both[100_000]
    naive, _ = _interleaved((100_000,), 3 if quick else 10, select=False)[100_000]
    ratio = large / small if small else float("inf")
    note = f"budget {BUDGET}, {kept_large} messages kept, 11 fixed/lore elements"
    return [
        {"bench": "assembly_fit", "metric": "fit_1k_history_p50_ms", "value": round(small, 4),
         "unit": "ms", "target": None, "met": None,
         "note": f"budget {BUDGET}, {kept_small} messages kept of 1,000"},
        {"bench": "assembly_fit", "metric": "fit_100k_history_p50_ms", "value": round(large, 4),
         "unit": "ms", "target": f"< {TARGET_MS:g} ms", "met": large < TARGET_MS,
         "note": f"{note}; history streamed newest-first through select_history"},
        {"bench": "assembly_fit", "metric": "fit_100k_over_1k_ratio", "value": round(ratio, 3),
         "unit": "x", "target": f"<= {TARGET_RATIO:g}", "met": ratio <= TARGET_RATIO,
         "note": f"flat = cost follows kept messages, not chat length; {repeats} samples of "
                 "each size taken in turn"},
        {"bench": "assembly_fit", "metric": "fit_100k_unselected_p50_ms",
         "value": round(naive, 3), "unit": "ms", "target": None, "met": None,
         "note": "contrast: all 100,000 messages passed to fit (O(history))"},
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
