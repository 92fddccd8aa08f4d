"""Stage 7, context shifting: fit the prompt into the token budget (R2.7).

Must not: count tokens itself (stage 6's counter does) or remove protected elements.
The algorithm lives in `evacore.shift`; the persisted anchor (kept per chat) keeps the
prompt's prefix byte-identical for several turns so providers' prompt caches keep hitting.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from evacore.pipeline.stages.token_count import count_elements, frame_of
from evacore.shift import FitAnchor, FitItem, fit

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

_REMOVABLE = {"history", "lore", "retrieval", "examples"}


def budget_of(tour: Tour) -> int:
    conn = tour.data["connection"]
    return int(conn["context_size"]) - int(conn["max_tokens"])


async def fit_prompt(core: Core, tour: Tour, *, reason: str = "budget"
                     ) -> list[dict[str, Any]]:
    """Fit the prompt; removes what must go (recorded) and returns what was removed.
    Elements without a count are counted first through the profile's async path (a
    remote tokenizer is asked, not estimated)."""
    total = await count_elements(core, tour)
    state = tour.data["chat"]["state"]
    anchor = FitAnchor.from_dict(state.get("fit_anchor"))
    if anchor.window_start is None and total <= budget_of(tour):
        # everything fits and no earlier cut holds a window: `fit` would keep it all as it
        # is (a long chat's prompt, most tours, without an item made per element)
        return _fitted(tour, [], anchor, total)
    items = []
    for i, el in enumerate(tour.prompt):
        kind = el.kind if el.kind in _REMOVABLE or el.protected else "other"
        if el.kind == "input":
            kind = "input"
        elif not el.protected and el.source.startswith("plugin:"):
            kind = "plugin"  # what a plugin added goes after examples, lowest priority first
        position = el.meta.get("position") if el.kind in ("history", "input") else None
        items.append(FitItem(
            id=el.id, tokens=int(el.tokens or 0), kind=kind, protected=el.protected,
            group=el.group, order=i, priority=el.priority,
            history_index=int(position) if position is not None else None,
        ))
    # the format's fixed cost (reply priming; a text template's frame) is sent too
    items.append(FitItem(id="(format)", tokens=frame_of(tour).fixed, kind="other",
                         protected=True, order=-1))
    chunk = core.settings.context.shift_chunk
    result = fit(items, budget_of(tour), chunk=chunk, anchor=anchor)
    removed = []
    for r in result.removed:
        if r.id in tour.prompt:
            tour.prompt.remove(r.id, reason=f"{reason}: {r.reason}")
        removed.append({"id": r.id, "kind": r.kind, "tokens": r.tokens, "reason": r.reason})
    return _fitted(tour, removed, result.anchor, result.total_tokens)


def _fitted(tour: Tour, removed: list[dict[str, Any]], anchor: FitAnchor, total: int
            ) -> list[dict[str, Any]]:
    """Keep what fitting decided in the chat's state and the diagnostics; `removed` back."""
    state = tour.data["chat"]["state"]
    state["fit_anchor"] = anchor.to_dict()
    kept = [int(el.meta["position"]) for el in tour.prompt
            if el.kind in ("history", "input") and el.meta.get("position") is not None]
    # `{{firstIncludedMessageId}}` of the next tour (SillyTavern reads the previous
    # generation's context boundary too)
    state["first_included_message_id"] = min(kept) if kept else None
    tour.diagnostics.setdefault("tokens", {}).update(budget=budget_of(tour), fitted=total)
    return removed


def track_prefix(tour: Tour) -> dict[str, Any]:
    """How many turns the prompt's prefix has survived (R2.7): the prefix is everything up
    to and including the first history message kept, compared with the previous tour's.
    Returns `{"turns": n, "changed": bool, "previous_turns": m}` (`turns` counts this tour;
    `previous_turns` is how long the prefix just replaced lasted)."""
    state = tour.data["chat"]["state"]
    before = tour.data.setdefault("prefix_before", dict(state.get("prefix") or {}))
    parts = []
    for el in tour.prompt:
        parts.append([el.id, el.role, el.text])
        if el.kind in ("history", "input"):
            break
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()[:32]
    same = before.get("digest") == digest
    turns = int(before.get("turns") or 0) + 1 if same else 1
    state["prefix"] = {"digest": digest, "turns": turns}
    out: dict[str, Any] = {"turns": turns, "changed": not same and bool(before)}
    if out["changed"]:
        out["previous_turns"] = int(before.get("turns") or 0)
    return out


class ContextShift:
    number = 7
    name = "context_shift"

    async def run(self, core: Core, tour: Tour) -> None:
        removed = await fit_prompt(core, tour)
        shift = tour.diagnostics.setdefault("shift", {})
        shift["removed"] = removed
        shift["history_loaded"] = tour.data.get("history_loaded")
        shift["history_reached_start"] = tour.data.get("history_reached_start")
        shift["prefix"] = track_prefix(tour)
