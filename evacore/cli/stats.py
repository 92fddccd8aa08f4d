"""`evacore stats` (R11): rule firings, tours by status and token totals, as GET /v1/stats.

Must not: compute figures itself; it prints what the rules service reports.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.table import Table

console = Console()


def rules_stats_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("rule", "fired", "retried", "", title="stream rules", title_justify="left")
    for row in rows:
        note = "" if row.get("current", True) else "[dim](deleted; records kept)[/dim]"
        style = "bold" if row["fired"] else "dim"
        table.add_row(f"[{style}]{row['rule']}[/{style}]", str(row["fired"]),
                      str(row["retried"]), note)
    return table


def render_stats(data: dict[str, Any]) -> Group:
    tours = Table("status", "tours", title="tours", title_justify="left")
    for status, count in sorted(data.get("tours", {}).items()):
        tours.add_row(status, str(count))
    tokens = data.get("tokens", {})
    usage = Table("prompt tokens", "completion tokens", title="tokens", title_justify="left")
    usage.add_row(str(tokens.get("prompt", 0)), str(tokens.get("completion", 0)))
    parts: list[Any] = [rules_stats_table(data.get("rules", [])), tours, usage]
    plugins = data.get("plugins")
    if plugins:
        failing = Table("plugin", "failures", "last error", title="plugins", title_justify="left")
        for name, info in sorted(plugins.get("by_plugin", {}).items()):
            failing.add_row(name, str(info["failures"]), str(info.get("last_error") or ""))
        parts.append(failing)
    return Group(*parts)


def stats(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Rule firings (every rule, zeros too), tours by status and token totals."""
    from evacore.cli.rules import run_with_core
    from evacore.services import rules as service

    async def collect(core: Any) -> dict[str, Any]:
        async with core.session() as s:
            return await service.stats(s, core.plugins)

    data = run_with_core(collect)
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
        return
    console.print(render_stats(data))
