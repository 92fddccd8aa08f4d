"""Benchmark of the lorebook scan (R2.4): 5,000 entries × 3 plain keys plus some regex keys
over a 20-message chat, against a naive per-entry regex loop on the same data.

Must not: download anything or write files; data is generated from a fixed seed.
"""

from __future__ import annotations

import random
import re
import statistics
import string
import time
from collections.abc import Callable
from typing import Any

from evacore.lore import (
    Lorebook,
    LoreEntry,
    ScanMessage,
    SourcedBook,
    TimedState,
    WorldInfoSettings,
    clear_index_cache,
    scan,
)

ENTRIES = 5_000
KEYS_PER_ENTRY = 3
REGEX_EVERY = 20  # one entry in 20 also has a regex key
MESSAGES = 20
WORDS_PER_MESSAGE = 60
KEY_WORDS_PER_MESSAGE = 2
TARGET_SPEEDUP = 20.0


def _word(rng: random.Random, used: set[str]) -> str:
    while True:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 9)))
        if w not in used:
            used.add(w)
            return w


def build_data(seed: int = 1234) -> tuple[Lorebook, list[ScanMessage]]:
    rng = random.Random(seed)
    used: set[str] = set()
    entries = []
    key_words: list[str] = []
    for uid in range(ENTRIES):
        keys = [_word(rng, used) for _ in range(KEYS_PER_ENTRY)]
        key_words.extend(keys)
        if uid % REGEX_EVERY == 0:
            stem = _word(rng, used)
            key_words.append(stem + "s")
            keys.append(f"/\\b{stem}(s|es)?\\b/i")
        entries.append(LoreEntry(uid=uid, keys=tuple(keys), content=f"Lore about {keys[0]}.",
                                 order=rng.randint(1, 500)))
    filler = [_word(rng, used) for _ in range(2_000)]
    messages = []
    for i in range(MESSAGES):
        words = [rng.choice(filler) for _ in range(WORDS_PER_MESSAGE - KEY_WORDS_PER_MESSAGE)]
        for _ in range(KEY_WORDS_PER_MESSAGE):
            words.insert(rng.randrange(len(words)), rng.choice(key_words).capitalize())
        messages.append(ScanMessage(name="User" if i % 2 else "Eva", text=" ".join(words) + ".",
                                    is_user=bool(i % 2)))
    return Lorebook(name="bench", entries=tuple(entries)), messages


def _naive_patterns(book: Lorebook) -> list[tuple[int, list[re.Pattern[str]]]]:
    out = []
    for e in book.entries:
        pats = []
        for key in e.keys:
            if key.startswith("/") and key.endswith("/i"):
                pats.append(re.compile(key[1:-2], re.IGNORECASE))
            else:
                pats.append(re.compile(re.escape(key), re.IGNORECASE))
        out.append((e.uid, pats))
    return out


def naive_scan(patterns: list[tuple[int, list[re.Pattern[str]]]], texts: list[str]) -> set[int]:
    """Every key of every entry searched in every message, one regex at a time."""
    hit = set()
    for uid, pats in patterns:
        if any(p.search(t) for p in pats for t in texts):
            hit.add(uid)
    return hit


def _p50(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), result


def run(quick: bool = False) -> list[dict[str, Any]]:
    book, messages = build_data()
    settings = WorldInfoSettings(depth=MESSAGES)
    sourced = [SourcedBook(book, "global")]

    def engine() -> Any:
        return scan(sourced, messages, settings, TimedState(), seed=1, turn=len(messages),
                    max_context=10_000_000, count_tokens=lambda s: len(s) // 4)

    clear_index_cache()
    t0 = time.perf_counter()
    first = engine()
    cold_ms = (time.perf_counter() - t0) * 1000
    build_ms = float(first.diagnostics["index"]["build_ms"])
    engine_ms, result = _p50(engine, 20 if quick else 60)

    patterns = _naive_patterns(book)
    texts = [f"{m.name}: {m.text}" for m in messages]
    naive_ms, naive_hits = _p50(lambda: naive_scan(patterns, texts), 1 if quick else 5)

    engine_hits = {a.uid for a in result.activated}
    agree = engine_hits == naive_hits
    ratio = naive_ms / engine_ms if engine_ms > 0 else float("inf")
    keys = result.diagnostics["index"]
    shape = (f"{ENTRIES} entries, {keys['plain_keys']} plain + {keys['regex_keys']} regex keys, "
             f"{MESSAGES} messages")
    return [
        {"bench": "lore", "metric": "index_build_cold_ms", "value": round(build_ms, 2), "unit": "ms",
         "target": None, "met": None,
         "note": f"automata + RE2 set build, once per book content; first scan {cold_ms:.1f} ms"},
        {"bench": "lore", "metric": "scan_p50_ms", "value": round(engine_ms, 3), "unit": "ms",
         "target": None, "met": None,
         "note": f"{shape}; cached index; {len(engine_hits)} entries activated"},
        {"bench": "lore", "metric": "naive_p50_ms", "value": round(naive_ms, 3), "unit": "ms",
         "target": None, "met": None,
         "note": f"per-entry Python re loop, patterns precompiled; same activations: {agree}"},
        {"bench": "lore", "metric": "speedup", "value": round(ratio, 1), "unit": "x",
         "target": f">= {TARGET_SPEEDUP:g}x", "met": bool(ratio >= TARGET_SPEEDUP and agree),
         "note": "naive p50 / engine p50"},
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
