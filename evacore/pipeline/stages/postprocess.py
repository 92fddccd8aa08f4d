"""Stage 13, post-processing hooks: plugins may process the final answer before it is saved.

Must not: implement the hook contract (plugins/dispatch.py does) or change what was streamed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class PostProcess:
    number = 13
    name = "postprocess"

    async def run(self, core: Core, tour: Tour) -> None:
        if not tour.answer:
            return
        tour.answer = await core.plugins.postprocess(tour, tour.answer)
