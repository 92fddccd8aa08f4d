"""`evacore bench [NAME…]`: run the benchmarks of the repository's `bench/` folder, print a
table per benchmark and write RESULTS.md.

Must not: measure or render anything itself; `bench/runner.py` (loaded from the bench
folder by path) does. The bench folder ships with a source checkout, not with the package.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import evacore

console = Console()
if not console.is_terminal:
    console = Console(width=200)  # piped or logged: keep metric names and notes whole
err = Console(stderr=True)


def default_bench_dir() -> Path:
    """`bench/` at the repository root, next to the package (editable installs)."""
    return Path(evacore.__file__).resolve().parent.parent / "bench"


def _runner(bench_dir: Path) -> ModuleType:
    path = bench_dir / "runner.py"
    if not path.is_file():
        err.print(f"[red]error:[/red] no benchmark folder at {bench_dir} (no runner.py). "
                  "The benchmarks ship with the source checkout, not with an installed "
                  "package: run from a clone (`pip install -e .`) or pass --bench-dir.")
        raise typer.Exit(2)
    spec = importlib.util.spec_from_file_location("evacore_bench_runner", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def _show(run: Any, fmt: Any, spread: Any = None) -> None:
    if run.error:
        err.print(f"[red]{run.name} failed[/red] after {run.seconds:.1f} s:\n{run.error}")
        return
    table = Table(title=f"{run.name} ({run.seconds:.1f} s)", title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    if spread is not None:
        table.add_column("spread", justify="right", no_wrap=True)
    for column in ("unit", "target", "result"):
        table.add_column(column, no_wrap=True)
    table.add_column("note")
    for r in run.rows:
        met = r.get("met")
        result = "" if met is None else ("[green]met[/green]" if met else "[red]missed[/red]")
        cells = [r["metric"], fmt(r["value"]), *([spread(r)] if spread is not None else []),
                 r.get("unit") or "", r.get("target") or "", result, str(r.get("note") or "")]
        table.add_row(*cells, end_section=False)
    console.print(table)


def bench(
    names: Annotated[list[str] | None, typer.Argument(help="Benchmarks to run (default: all).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small smoke variant (seconds).")] = False,
    bench_dir: Annotated[Path | None, typer.Option(help="The benchmark folder.")] = None,
    output: Annotated[Path | None, typer.Option(
        help="Markdown file to write (default bench/RESULTS.md; RESULTS.quick.md with --quick).",
    )] = None,
    list_only: Annotated[bool, typer.Option("--list", help="List the benchmarks and exit.")] = False,
) -> None:
    """Run benchmarks, print their figures against targets and write RESULTS.md."""
    folder = (bench_dir or default_bench_dir()).resolve()
    runner = _runner(folder)
    if list_only:
        for name in runner.discover(folder):
            print(name)
        return
    try:
        chosen = runner.select(folder, names or None)
    except runner.UnknownBench as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc

    def progress(name: str, run: Any) -> None:
        if run is None:
            err.print(f"running [bold]{name}[/bold]…")
        else:
            _show(run, runner._report.fmt, getattr(runner._report, "spread", None))

    runs = runner.run_all(folder, list(chosen), quick=quick, progress=progress)
    words = ["evacore", "bench", *(names or []), *(["--quick"] if quick else []),
             *(["--bench-dir", str(bench_dir)] if bench_dir else []),
             *(["--output", str(output)] if output else [])]
    command = " ".join(shlex.quote(w) for w in words)
    out = runner.store(runs, output or runner.default_output(folder, quick), command=command,
                       quick=quick)
    missed = sum(len(r.missed) for r in runs)
    failed = [r.name for r in runs if r.error]
    err.print(f"wrote {out}; {missed} target(s) missed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    if failed:
        raise typer.Exit(1)
