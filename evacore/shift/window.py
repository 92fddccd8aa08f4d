"""Pick the history `fit` needs from a newest-first stream, so fitting costs O(kept).

Must not: load history itself or decide what is removed (that is `fit`); it only stops
reading the caller's newest-first iterator once older messages cannot matter.
"""

from __future__ import annotations

from collections.abc import Iterable

from evacore.shift.fit import FitAnchor, FitItem


def select_history(
    newest_first: Iterable[FitItem], room: int, anchor: FitAnchor | None = None
) -> list[FitItem]:
    """History candidates for `fit`, oldest first.

    Reads newest to oldest and takes: every item inside the persisted window
    (`history_index >= anchor.window_start`), then older items while their running sum
    stays within `room` (the budget minus everything that is not history), then the first
    item past `room` together with the rest of its group. That last item lets `fit` see
    the overflow and cut a whole chunk, instead of the selection quietly dropping one old
    message per turn. `room` only bounds the reading; groups are never split.
    """
    start = anchor.window_start if anchor is not None else None
    taken: list[FitItem] = []
    used = 0
    overflow_group: str | None = None
    overflowed = False
    for item in newest_first:
        index = item.history_index if item.history_index is not None else item.order
        in_window = start is not None and index >= start
        if overflowed:
            if item.group is None or item.group != overflow_group:
                break
        elif not in_window and used + item.tokens > room:
            overflowed = True
            overflow_group = item.group
        taken.append(item)
        used += item.tokens
    taken.reverse()
    return taken
