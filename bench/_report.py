"""Rendering for the benchmark runner: machine notes, RESULTS.md and plain-text tables.

Must not: run benchmarks or change figures; it formats what the runner stored.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def fmt(value: Any) -> str:
    """A figure for a table: thousands separators, about four significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        size = abs(value)
        if size >= 1000:
            return f"{value:,.0f}"
        if size >= 100:
            return f"{value:.1f}"
        if size >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "**missed**")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True).stdout
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "evacore"],
                               capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.strip() + (" (with uncommitted changes under evacore/)" if dirty.strip() else "")


def machine() -> dict[str, Any]:
    """What the figures depend on: CPU, core count, load, Python, platform, commit."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {"cpu": _cpu_model(), "cpus": cpus, "load_average": load,
            "python": platform.python_version(), "platform": platform.platform(terse=True),
            "commit": _commit()}


def spread(row: dict[str, Any]) -> str:
    """`min–max (n runs)` of a figure measured more than once; `1 run` otherwise."""
    runs = row.get("runs") or 1
    low_high = row.get("spread")
    if runs <= 1 or not low_high:
        return "1 run" if isinstance(row.get("value"), int | float) else ""
    low, high = low_high
    return f"{fmt(low)}–{fmt(high)} ({runs} runs)"


def _table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| metric | value | spread | unit | target | result | note |",
           "|---|---:|---:|---|---|---|---|"]
    for r in rows:
        note = str(r.get("note") or "").replace("|", "\\|").replace("\n", " ")
        out.append(f"| {r['metric']} | {fmt(r['value'])} | {spread(r)} | {r.get('unit') or ''} | "
                   f"{r.get('target') or ''} | {verdict(r.get('met'))} | {note} |")
    return out


def markdown(sections: dict[str, dict[str, Any]], *, command: str, date: str,
             machine: dict[str, Any], earlier: dict[str, dict[str, Any]] | None = None,
             data_name: str = "RESULTS.json") -> str:
    """RESULTS.md: machine notes, a summary of targets, then one table per benchmark of this
    run (`earlier`: benchmarks not run this time, only named, their figures stay in the
    data file)."""
    load = ", ".join(map(str, machine["load_average"])) or "unknown"
    lines = [
        "# evacore benchmarks", "",
        (f"Written {date} by `{command}`: every figure below was measured by that command. "
         "A figure measured in several runs shows its median, with the spread (min–max) over "
         "the runs next to it. Regenerate everything with `evacore bench`."), "",
        "## Machine", "",
        (f"- CPU: {machine['cpu']}, {machine['cpus']} usable cores; load average at writing "
         f"{load} (1, 5, 15 min)."),
        (f"- Python {machine['python']} on {machine['platform']}; evacore commit "
         f"{machine['commit']}."),
        ("- A shared machine: other work may run on the same cores, so a figure's spread "
         "over runs is part of the figure, and ratios measured side by side in one run "
         "travel better than absolute times. The relay benchmark pins evacore (and the "
         "LiteLLM proxy, when installed) to one core and the load client plus the fake "
         "upstream to the other (`taskset`)."), "",
        "## Summary", "",
        "| benchmark | targets met | targets missed | run time | figures from |",
        "|---|---:|---:|---:|---|",
    ]
    for name, s in sections.items():
        met = sum(1 for r in s["rows"] if r.get("met") is True)
        missed = sum(1 for r in s["rows"] if r.get("met") is False)
        state = "failed" if s.get("error") else f"{s['seconds']:.1f} s"
        quick = " (quick)" if s.get("quick") else ""
        lines.append(f"| [{name}](#{name}) | {met} | {missed} | {state} | {s['date']}{quick} |")
    if earlier:
        names = ", ".join(f"{name} ({s['date']})" for name, s in earlier.items())
        lines += ["", (f"Not run by this command: {names}; their last figures are in "
                       f"`{data_name}`, not here.")]
    for name, s in sections.items():
        lines += ["", f"## {name}", ""]
        if s.get("about"):
            lines += [s["about"], ""]
        load = ", ".join(map(str, s.get("machine", {}).get("load_average", [])))
        quick = " (quick variant)" if s.get("quick") else ""
        lines += [(f"`{s['command']}` — {s['date']}{quick}, {s['seconds']:.1f} s, "
                   f"load average {load or 'unknown'}."), ""]
        if s.get("error"):
            lines += ["This benchmark failed:", "", "```", s["error"].rstrip(), "```"]
            continue
        lines += _table(s["rows"])
        if s.get("explanation"):
            lines += ["", "### What limits it", "", s["explanation"]]
        elif any(r.get("met") is False for r in s["rows"]):
            lines += ["", "### What limits it", "",
                      "The benchmark module gives no explanation for its missed targets."]
    return "\n".join(lines) + "\n"


def text_table(run: Any) -> str:
    """A plain-text table of one run (for `python bench/runner.py`)."""
    if run.error:
        return f"== {run.name}: FAILED\n{run.error}"
    lines = [f"== {run.name} ({run.seconds:.1f} s)"]
    for r in run.rows:
        target = f"  target {r['target']}: {'met' if r['met'] else 'MISSED'}" \
            if r.get("met") is not None else ""
        lines.append(f"  {r['metric']:<34} {fmt(r['value']):>12} {r.get('unit') or '':<10}"
                     f" {spread(r):<24}{target}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(machine(), file=sys.stdout)
