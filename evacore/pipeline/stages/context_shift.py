"""Stage 7, context shifting: fit the prompt into the token budget (R2.7).

Must not: count tokens itself beyond asking stage 6's counter, or remove protected elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evacore.errors import ContextOverflow
from evacore.pipeline.stages.token_count import count_prompt

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


def budget_of(tour: Tour) -> int:
    conn = tour.data["connection"]
    return int(conn["context_size"]) - int(conn["max_tokens"])


def fit_prompt(core: Core, tour: Tour, *, reason: str = "budget") -> list[dict[str, object]]:
    budget = budget_of(tour)
    total = count_prompt(core, tour)
    removed: list[dict[str, object]] = []
    order = ("history", "lore", "retrieval", "examples")
    for kind in order:
        if total <= budget:
            break
        groups: dict[str, list[str]] = {}
        for el in tour.prompt:
            if el.kind == kind and not el.protected:
                groups.setdefault(el.group or el.id, []).append(el.id)
        for _, ids in groups.items():
            if total <= budget:
                break
            for element_id in ids:
                el = tour.prompt.remove(element_id, reason=reason)
                total -= el.tokens or 0
                removed.append({"id": el.id, "kind": el.kind, "tokens": el.tokens})
    if total > budget:
        protected = sum(el.tokens or 0 for el in tour.prompt if el.protected)
        raise ContextOverflow(
            f"protected content needs {protected} tokens but the budget is {budget} "
            f"(context {tour.data['connection']['context_size']} minus "
            f"{tour.data['connection']['max_tokens']} reserved for the answer)",
            protected_tokens=protected, budget=budget,
        )
    return removed


class ContextShift:
    number = 7
    name = "context_shift"

    async def run(self, core: Core, tour: Tour) -> None:
        removed = fit_prompt(core, tour)
        tour.diagnostics.setdefault("shift", {})["removed"] = removed
