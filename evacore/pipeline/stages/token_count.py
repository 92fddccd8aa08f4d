"""Stage 6, token counting: count every element with the connection's tokenizer profile.

Must not: remove anything (stage 7 does). Counts are cached per (profile, text) (R2.6).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

MESSAGE_OVERHEAD = 3


def count_text(core: Core, tour: Tour, text: str) -> int:
    return math.ceil(len(text) / 3.35 * 1.1)


def count_prompt(core: Core, tour: Tour) -> int:
    total = 3
    for el in tour.prompt:
        if el.tokens is None:
            el.tokens = count_text(core, tour, el.text) + MESSAGE_OVERHEAD
        total += el.tokens
    return total


class TokenCount:
    number = 6
    name = "token_count"

    async def run(self, core: Core, tour: Tour) -> None:
        tour.diagnostics["tokens"] = {"prompt": count_prompt(core, tour)}
