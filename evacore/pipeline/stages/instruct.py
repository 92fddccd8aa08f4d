"""Stage 9, instruct format rendering: chat mode keeps the array (then post-processing, R4);
text mode renders one prompt string with stop strings.

Must not: send anything; the result is the tour's prompt copy for the steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

TEXT_KINDS = ("openai-text", "kobold")


def prompt_messages(tour: Tour) -> list[dict[str, Any]]:
    """The prompt as OpenAI-format messages; empty non-history elements are left out."""
    out = []
    for el in tour.prompt:
        if el.kind not in ("history", "input") and not el.text.strip() and not el.tool_calls:
            continue
        out.append(el.to_message())
    return out


class Instruct:
    number = 9
    name = "instruct"

    async def run(self, core: Core, tour: Tour) -> None:
        tour.data["messages"] = prompt_messages(tour)
