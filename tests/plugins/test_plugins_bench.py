"""The dispatcher benchmark runs and reports rows in the shape `evacore bench` collects."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_dispatch.py"


def test_r3_dispatch_bench_reports_the_overhead_against_its_target() -> None:
    spec = importlib.util.spec_from_file_location("bench_dispatch_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.run(quick=True)
    keys = {"bench", "metric", "value", "unit", "target", "met", "note"}
    assert all(set(r) == keys and r["bench"] == "dispatch" and r["value"] > 0 for r in rows)
    target = [r for r in rows if r["met"] is not None]
    assert [(r["metric"], r["target"]) for r in target] == [
        ("noop_write_p50_us_per_tour", "< 200 µs"),
        ("changelog_diff_200_elements_p50_ms", "< 20 ms")]
