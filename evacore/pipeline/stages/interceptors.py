"""Stage 8, plugin interceptors: plugins view and change the prompt, then the budget is re-applied.

Must not: implement the hook contract (plugins/dispatch.py alone does). After the last
interceptor the prompt is recounted and stage 7 re-applied (R2.1 stage 8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Interceptors:
    number = 8
    name = "interceptors"

    async def run(self, core: Core, tour: Tour) -> None:
        return None
