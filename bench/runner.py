"""The benchmark runner behind `evacore bench`: finds `bench_<name>.py` modules, runs each
one's `run(quick)` several times, keeps for every figure the median and the spread (min-max)
over those runs, stores the rows per benchmark in RESULTS.json and renders RESULTS.md from
this run's benchmarks only.

Must not: measure anything itself or invent a target: each module returns its own rows
(`bench, metric, value, unit, target, met, note`); the runner only re-judges a simple target
(`<= 5 ms`, `>= 0.9`) against the median. A module that repeats its own measurements (it
sets `REPEATS = 1` and returns rows with `spread` and `runs`) is run once.

    python bench/runner.py [NAME ...] [--quick] [--repeats N] [--output PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _report

ROW_KEYS = ("bench", "metric", "value", "unit", "target", "met", "note", "spread", "runs")
REPEATS = 3
"""Runs of each benchmark in a full run (quick runs: one); a module may set its own."""
_TARGET = re.compile(r"^\s*(<=|>=|<|>|=)\s*([-+]?[\d,]*\.?\d+)")


class UnknownBench(LookupError):
    """A benchmark name with no `bench_<name>.py` in the bench folder."""


@dataclass
class BenchRun:
    """One benchmark's outcome: its rows, how long it took, and its error if it failed."""

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    explanation: str = ""
    about: str = ""

    @property
    def missed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("met") is False]


def discover(bench_dir: Path) -> dict[str, Path]:
    """`bench_<name>.py` files of the folder by name, sorted."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(bench_dir.glob("bench_*.py"))
            if p.is_file() and p.stem != "bench_"}


def load(path: Path) -> ModuleType:
    """Import one benchmark module by path (the bench folder is not a package)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"evacore_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


def _clean(row: Any, name: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise TypeError(f"bench {name!r} returned a row that is not a dict: {row!r}")
    out = {key: row.get(key) for key in ROW_KEYS}
    out["bench"] = out["bench"] or name
    value = out["value"]
    if isinstance(value, float) and not math.isfinite(value):
        out["value"] = None
    elif value is not None and not isinstance(value, bool | int | float | str):
        out["value"] = float(value)  # numpy scalars and the like
    if out["met"] is not None:
        out["met"] = bool(out["met"])
    return out


def judge(target: Any, value: Any) -> bool | None:
    """A simple target (`<= 5 ms`, `>= 0.9`, `= 0`, `>= 20x`) against a value; None when the
    target is not of that form."""
    if not isinstance(target, str) or not isinstance(value, int | float) \
            or isinstance(value, bool):
        return None
    match = _TARGET.match(target)
    if not match:
        return None
    op, bound = match.group(1), float(match.group(2).replace(",", ""))
    return {"<=": value <= bound, ">=": value >= bound, "<": value < bound,
            ">": value > bound, "=": value == bound}[op]


def combine(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of several runs of one module as one row per metric: the median value, its
    spread (min, max) and the number of runs; the note of the run nearest the median; the
    module's verdict re-judged on the median (an exact target such as `= 0` on every run, the
    note then from a run that missed it; a majority of the runs' verdicts where the target is
    not simple)."""
    if len(runs) == 1:
        return [{**r, "spread": r.get("spread"), "runs": r.get("runs") or 1} for r in runs[0]]
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for rows in runs:
        for row in rows:
            by_metric.setdefault(row["metric"], []).append(row)
    out = []
    for metric, rows in by_metric.items():
        numbers = [r["value"] for r in rows if isinstance(r["value"], int | float)
                   and not isinstance(r["value"], bool)]
        first = rows[0]
        if len(numbers) != len(rows) or not numbers:
            out.append({**rows[-1], "spread": None, "runs": len(rows)})
            continue
        median = statistics.median(numbers)
        if all(isinstance(n, int) for n in numbers) and median == int(median):
            median = int(median)
        nearest = min(rows, key=lambda r: abs(r["value"] - median))
        met = None
        if first.get("met") is not None:  # only figures the module judges are judged
            target = str(first.get("target") or "")
            if target.lstrip().startswith("=") and judge(target, median) is not None:
                # an exact target (`= 0` errors) holds only if it held in every run
                failing = [r for r in rows if not judge(target, r["value"])]
                met = not failing
                nearest = failing[0] if failing else nearest
            else:
                met = judge(target, median)
                if met is None:
                    verdicts = [bool(r.get("met")) for r in rows]
                    met = verdicts.count(True) > len(verdicts) / 2
        out.append({**nearest, "metric": metric, "value": median,
                    "spread": [min(numbers), max(numbers)], "runs": len(rows), "met": met})
    return out


def run_one(name: str, path: Path, quick: bool, repeats: int | None = None) -> BenchRun:
    """Run one module (`repeats` times, or its own `REPEATS`); an exception becomes the run's
    error, never the runner's."""
    started = time.perf_counter()
    result = BenchRun(name)
    try:
        module = load(path)
        result.about = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())
        own = getattr(module, "REPEATS", None)
        times = 1 if quick else int(own if own is not None else repeats or REPEATS)
        runs = [[_clean(row, name) for row in module.run(quick=quick)]
                for _ in range(max(1, times))]
        result.rows = combine(runs)
        explain = getattr(module, "explain", None)
        if callable(explain):
            result.explanation = str(explain(result.rows) or "").strip()
    except Exception as exc:  # noqa: BLE001 - one broken bench must not stop the others
        tail = traceback.format_exc(limit=4).strip().splitlines()[-12:]
        result.error = f"{type(exc).__name__}: {exc}\n" + "\n".join(tail)
    result.seconds = time.perf_counter() - started
    return result


def select(bench_dir: Path, names: list[str] | None) -> dict[str, Path]:
    found = discover(bench_dir)
    if not names:
        return found
    unknown = [n for n in names if n not in found]
    if unknown:
        raise UnknownBench(f"unknown benchmark(s): {', '.join(unknown)}; "
                           f"available: {', '.join(found) or '(none)'}")
    return {n: found[n] for n in names}


def run_all(bench_dir: Path, names: list[str] | None = None, *, quick: bool = False,
            progress: Callable[[str, BenchRun | None], None] | None = None,
            repeats: int | None = None) -> list[BenchRun]:
    """Run the selected benchmarks in name order; `progress(name, None)` before each one
    and `progress(name, run)` after it."""
    runs = []
    for name, path in select(bench_dir, names).items():
        if progress:
            progress(name, None)
        run = run_one(name, path, quick, repeats)
        runs.append(run)
        if progress:
            progress(name, run)
    return runs


def default_output(bench_dir: Path, quick: bool) -> Path:
    """RESULTS.md for full runs; quick runs go elsewhere so they never replace it."""
    return bench_dir / ("RESULTS.quick.md" if quick else "RESULTS.md")


def store(runs: list[BenchRun], output: Path, *, command: str, quick: bool) -> Path:
    """Merge the runs into `<output stem>.json` next to `output` (benchmarks not run this
    time keep their last figures there) and write the Markdown rendering of this run's
    benchmarks to `output`: every figure in it was measured by this command."""
    data_path = output.with_suffix(".json")
    try:
        saved: dict[str, Any] = json.loads(data_path.read_text()) if data_path.exists() else {}
    except (OSError, ValueError):
        saved = {}
    sections: dict[str, Any] = saved.get("benches", {}) if isinstance(saved, dict) else {}
    machine = _report.machine()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for run in runs:
        sections[run.name] = {"rows": run.rows, "seconds": round(run.seconds, 2),
                              "error": run.error, "explanation": run.explanation, "about": run.about,
                              "command": command, "date": date, "quick": quick,
                              "machine": machine}
    output.parent.mkdir(parents=True, exist_ok=True)
    data_path.write_text(json.dumps({"benches": dict(sorted(sections.items()))}, indent=1,
                                    ensure_ascii=False) + "\n")
    ran = {run.name for run in runs}
    current = {k: v for k, v in sorted(sections.items()) if k in ran}
    earlier = {k: v for k, v in sorted(sections.items()) if k not in ran}
    output.write_text(_report.markdown(current, command=command, date=date, machine=machine,
                                       earlier=earlier, data_name=data_path.name))
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run evacore's benchmarks.")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small smoke variant")
    parser.add_argument("--output", type=Path, default=None, help="Markdown file to write")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"runs of each benchmark (default {REPEATS}; quick: 1)")
    args = parser.parse_args(argv)
    try:
        runs = run_all(HERE, args.names or None, quick=args.quick, repeats=args.repeats,
                       progress=lambda n, r: print(f"{n}: running…" if r is None else
                                                   f"{n}: {r.seconds:.1f} s", flush=True))
    except UnknownBench as exc:
        print(exc, file=sys.stderr)
        return 2
    command = "python bench/runner.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = store(runs, args.output or default_output(HERE, args.quick), command=command.strip(),
                quick=args.quick)
    for run in runs:
        print(_report.text_table(run))
    print(f"wrote {out}")
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
