"""What a stage is: a named unit with one job, run by the runner and timed.

Must not: implement plugin contract rules (plugins/dispatch.py alone does) or call other stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Stage(Protocol):
    number: int
    name: str

    async def run(self, core: Core, tour: Tour) -> None: ...
