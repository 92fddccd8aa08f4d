"""Stage 5, memory/RAG: insert memory blocks and retrieval results (R2.5).

Must not: implement search or ranking (memory/ does); this stage calls it and places results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Memory:
    number = 5
    name = "memory"

    async def run(self, core: Core, tour: Tour) -> None:
        return None
