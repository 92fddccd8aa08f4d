"""Pick the history candidates worth passing to `fit`: the newest items that can fit.

Must not: load history itself; it consumes the caller's newest-first iterator only as far
as the budget reaches, so fitting costs O(kept messages), not O(chat length).
"""

from __future__ import annotations

from collections.abc import Iterable

from evacore.shift.fit import FitItem


def newest_that_fit(newest_first: Iterable[FitItem], room: int) -> list[FitItem]:
    """Items from a newest-first history stream while their sum stays within `room`, plus
    the rest of the group the last one belongs to (groups are never split); oldest first.

    `room` is the budget minus everything that is not history. The first item that does
    not fit stops the scan (history is cut from the oldest end, never skipped over).
    """
    taken: list[FitItem] = []
    used = 0
    open_group: str | None = None
    for item in newest_first:
        same_group = item.group is not None and item.group == open_group
        if used + item.tokens > room and not same_group:
            break
        taken.append(item)
        used += item.tokens
        open_group = item.group
    taken.reverse()
    return taken
