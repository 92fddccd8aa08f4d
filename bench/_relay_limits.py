"""What limits the relay benchmark's missed targets, written from this run's figures.

Must not: measure; it reads the rows bench_relay produced.
"""

from __future__ import annotations

from typing import Any


def explain(rows: list[dict[str, Any]]) -> str:
    missed = [r["metric"] for r in rows if r.get("met") is False]
    return "Missed: " + ", ".join(missed) if missed else ""
