"""Stage 8, plugin interceptors: plugins view and change the prompt, then the budget is re-applied.

Must not: implement the hook contract (plugins/dispatch.py alone does). After the last
interceptor the prompt is recounted and stage 7 re-applied (R2.1 stage 8): no plugin can
get past the budget or remove protected content, and what a plugin added may itself be cut
(after history, lore, retrieval and examples; logged as actor `stage:budget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evacore.logs import get_logger
from evacore.pipeline.stages.context_shift import fit_prompt, track_prefix
from evacore.plugins.host import flush_changelog, note_records
from evacore.plugins.spec import HOOK_KINDS
from evacore.prompt.elements import Element, Prompt

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)


def apply_dicts(prompt: Prompt, dicts: list[dict[str, Any]], *, reason: str) -> None:
    """Take a plugin's accepted message dicts back into the prompt (host-only fields kept)."""
    old = {el.id: el for el in prompt}
    new = [Element.from_dict(d, base=old.get(str(d["id"]))) for d in dicts]
    prompt.replace_all(new, reason=reason)


class Interceptors:
    number = 8
    name = "interceptors"

    async def run(self, core: Core, tour: Tour) -> None:
        host = core.plugins
        if not host.manager.hooks("interceptor"):
            return
        prompt = tour.prompt
        result = await host.dispatcher.run_interceptors(
            lambda: [el.to_dict() for el in prompt], ctx_base=host.ctx_base(tour))
        note_records(tour, "interceptors", result.log)
        tour.diagnostics.setdefault("plugin_order", {})["interceptor"] = result.order
        if not result.changed:
            return
        assert result.messages is not None  # a hook's change made them
        apply_dicts(tour.prompt, result.messages, reason="plugin")
        tour.prompt.take_changes()  # each hook's own record already says what it changed
        removed = await fit_prompt(core, tour, reason="budget after interceptors")
        tour.prompt.take_changes()
        shift = tour.diagnostics.setdefault("shift", {})
        shift["removed_after_interceptors"] = removed
        shift["prefix"] = track_prefix(tour)  # measured on the prompt as it is now
        if removed:
            flush_changelog(tour, {"stage": HOOK_KINDS["interceptor"].stage_name,
                                   "actor": "stage:budget", "removed": removed})
            cut = [r["id"] for r in removed if r["kind"] == "plugin"]
            if cut:
                log.warning("plugins.elements_cut_to_fit", ids=cut)
