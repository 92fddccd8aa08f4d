"""`evacore import PATH...` and `evacore export WHAT DEST`: cards, lorebooks, presets and chats in
and out of the configured database, with a Rich progress bar and a summary table (R11).

Must not: parse files or map them to rows (evacore.importing does); it drives the Core.
Exit codes of `import`: 0 when anything was imported, 1 when nothing was, 2 on a usage error.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evacore.config import Settings, load_settings

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.importing.batch import FileResult
    from evacore.importing.export import Exported

WHATS = ("characters", "chats", "presets", "lorebooks")
FORMATS = ("png", "json", "charx")

DETAIL_ROWS = 50
"""Above this many files the summary lists only skipped and failed files (unless --verbose)."""

console = Console()
err = Console(stderr=True)


@dataclass
class ImportSummary:
    results: list[FileResult]
    seconds: float
    """Time spent importing the files (after the core started)."""
    startup_seconds: float = 0.0
    """Time to open the database and start the core."""

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


async def _core(settings: Settings) -> Core:
    from evacore.core import start_core

    core = await start_core(settings)
    if core.bootstrap_token:
        err.print(f"created the master token (shown once, store it now): {core.bootstrap_token}")
    return core


def _progress(out: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=out)


async def run_import(paths: list[Path], settings: Settings, *,
                     out: Console | None = None) -> ImportSummary:
    """Import files and folders (recursively) into the database of `settings`, showing a
    progress bar on `out` (stderr by default). Raises FileNotFoundError for a missing path."""
    from evacore.importing.batch import Importer, collect_files

    files = collect_files(paths)
    begin = time.perf_counter()
    core = await _core(settings)
    started = time.perf_counter()
    try:
        with _progress(out or err) as progress:
            task = progress.add_task("importing", total=len(files), current="")

            def tick(result: FileResult) -> None:
                progress.update(task, advance=1, current=result.path.name)

            results = await Importer(core).run(files, tick)
    finally:
        await core.aclose()
    return ImportSummary(results, time.perf_counter() - started, started - begin)


def _where(path: Path, roots: list[Path]) -> str:
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            return str(path.relative_to(root.parent))
    return str(path)


def print_summary(summary: ImportSummary, roots: list[Path], *, verbose: bool = False,
                  out: Console | None = None) -> None:
    out = out or console
    if not out.is_terminal:  # piped or logged: full lines rather than a folded 80-column table
        out = Console(file=out.file, width=max(out.width, 200), no_color=out.no_color)
    totals = Table("result", "kind", "files", title="Import summary")
    counts = Counter((r.status, r.kind or "-") for r in summary.results)
    for (status, kind), n in sorted(counts.items()):
        totals.add_row(status, kind, str(n))
    out.print(totals)
    shown = [r for r in summary.results
             if verbose or len(summary.results) <= DETAIL_ROWS or r.status != "imported"]
    if shown:
        details = Table(show_lines=False)
        for name in ("file", "kind", "result", "detail"):
            details.add_column(name, overflow="fold")  # narrow terminals wrap, never hide
        for r in shown:
            note = r.detail + (f" [dim]({len(r.warnings)} warnings)[/dim]" if r.warnings else "")
            style = {"imported": "green", "skipped": "yellow", "failed": "red"}[r.status]
            details.add_row(_where(r.path, roots), r.kind or "-",
                            f"[{style}]{r.status}[/{style}]", note)
        out.print(details)
    out.print(f"imported {summary.count('imported')}, skipped {summary.count('skipped')}, "
              f"failed {summary.count('failed')} in {summary.seconds:.2f} s")


def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (searched recursively).")],
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="List every file in the summary.")] = False,
) -> None:
    """Import character cards (PNG/JSON/CHARX), World Info lorebooks, presets and SillyTavern
    chats; kinds are told apart by content. Bad files are reported and skipped."""
    try:
        summary = asyncio.run(run_import(paths, load_settings()))
    except FileNotFoundError as exc:
        err.print(f"[red]error:[/red] no such file or folder: {exc}")
        raise typer.Exit(2) from exc
    print_summary(summary, paths, verbose=verbose)
    raise typer.Exit(0 if summary.count("imported") else 1)


async def run_export(what: str, dest: Path, fmt: str, settings: Settings, *,
                     out: Console | None = None) -> list[Exported]:
    from evacore.importing.export import export_all

    core = await _core(settings)
    try:
        with _progress(out or err) as progress:
            task = progress.add_task(f"exporting {what}", total=None, current="")

            def tick(total: int, item: Exported) -> None:
                progress.update(task, total=total, advance=1, current=item.path.name)

            return await export_all(core, what, dest, fmt, tick)
    finally:
        await core.aclose()


def export_cmd(
    what: Annotated[str, typer.Argument(help="characters, chats, presets or lorebooks.")],
    dest: Annotated[Path, typer.Argument(help="Folder to write into (created if missing).")],
    fmt: Annotated[str, typer.Option("--format", "-f",
                                     help="Card format: png, json or charx.")] = "png",
) -> None:
    """Export every stored character, chat, preset or lorebook as files in DEST."""
    if what not in WHATS:
        err.print(f"[red]error:[/red] WHAT must be one of {', '.join(WHATS)}")
        raise typer.Exit(2)
    if fmt not in FORMATS:
        err.print("[red]error:[/red] --format must be png, json or charx")
        raise typer.Exit(2)
    if dest.exists() and not dest.is_dir():
        err.print(f"[red]error:[/red] {dest} is not a folder")
        raise typer.Exit(2)
    items = asyncio.run(run_export(what, dest, fmt, load_settings()))
    console.print(f"exported {len(items)} {what} to {dest}")


def register(app: typer.Typer) -> None:
    """Add `import` and `export` to the top-level command line."""
    app.command("import")(import_cmd)
    app.command("export")(export_cmd)
