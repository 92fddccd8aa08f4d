"""Stage 4, lorebook: insert activated World Info entries (R2.4).

Must not: implement matching (lore/ does); this stage gathers books, calls the engine and
places each activation in the prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Lorebook:
    number = 4
    name = "lorebook"

    async def run(self, core: Core, tour: Tour) -> None:
        return None
