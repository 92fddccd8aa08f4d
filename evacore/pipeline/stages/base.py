"""What a stage is: a named unit with one job, run by the runner and timed, and the change
log entry that attributes a stage's prompt changes to it.

Must not: implement plugin contract rules (plugins/dispatch.py alone does) or call other stages.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Stage(Protocol):
    number: int
    name: str

    async def run(self, core: Core, tour: Tour) -> None: ...


async def run_stage(core: Core, tour: Tour, stage: Stage) -> None:
    t0 = perf_counter()
    try:
        await stage.run(core, tour)
    finally:
        tour.add_time(stage.name, perf_counter() - t0)
    record_changes(tour, stage.name, "stage")


def record_changes(tour: Tour, stage: str, actor: str, **extra: Any) -> None:
    """Attribute the prompt's pending changes to `stage`/`actor` in the change log."""
    changes = tour.prompt.take_changes()
    if not changes and not extra:
        return
    added: list[str] = []
    removed: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    moved = False
    for c in changes:  # one pass: a history's every message is an `add` here
        op = c.op
        if op == "add":
            added.append(c.id)
        elif op == "remove":
            removed.append({"id": c.id, "reason": c.reason})
        elif op == "change":
            changed.append({"id": c.id, "before": _short(c.before), "after": _short(c.after)})
        elif op == "move":
            moved = True
    entry: dict[str, Any] = {"stage": stage, "actor": actor, "added": added,
                             "removed": removed, "changed": changed}
    if moved:
        entry["moved"] = True
    entry.update(extra)
    tour.diagnostics.setdefault("changes", []).append(entry)


def _short(snapshot: dict[str, Any] | None, limit: int = 2000) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    out = dict(snapshot)
    content = out.get("content")
    if isinstance(content, str) and len(content) > limit:
        out["content"] = content[:limit] + f"… [{len(content) - limit} more characters]"
    return out
