"""Group a scan's activations by destination as SillyTavern does (reference §2.7).

Must not: build the prompt; the prompt builder decides where each destination sits.
Destinations: before/after the character, Author's Note top/bottom, one insertion per
(depth, role), example blocks, named outlets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evacore.lore.model import Position, Role
from evacore.lore.records import Activation


@dataclass(frozen=True)
class DepthInsert:
    """One in-chat insertion: `content` goes `depth` messages from the end, as `role`."""

    depth: int
    role: Role
    content: str
    mandatory: bool
    activations: tuple[Activation, ...]


@dataclass(frozen=True)
class LorePlacement:
    before: str = ""
    """`{{wiBefore}}` / `{{loreBefore}}`: entries at `before_char`, joined with newlines."""
    after: str = ""
    """`{{wiAfter}}` / `{{loreAfter}}`: entries at `after_char`."""
    an_top: str = ""
    """Above the Author's Note text (only when the note is inserted this turn)."""
    an_bottom: str = ""
    at_depth: tuple[DepthInsert, ...] = ()
    examples_top: tuple[str, ...] = ()
    """Example-dialogue blocks placed before the card's examples."""
    examples_bottom: tuple[str, ...] = ()
    outlets: dict[str, str] = field(default_factory=dict)
    """Text per outlet name, shown only through `{{outlet::name}}`."""


def place(activations: Sequence[Activation]) -> LorePlacement:
    """Activations must be in scan order (ascending `order`, as `ScanResult.activated` is)."""
    lists: dict[Position, list[str]] = {p: [] for p in Position}
    depth: dict[tuple[int, Role], list[Activation]] = {}
    outlets: dict[str, list[str]] = {}
    for act in activations:
        if not isinstance(act.position, Position):
            continue
        if act.position is Position.AT_DEPTH:
            depth.setdefault((act.depth, act.role), []).append(act)
        elif act.position is Position.OUTLET:
            if act.outlet_name:
                outlets.setdefault(act.outlet_name, []).append(act.content)
        else:
            lists[act.position].append(act.content)
    inserts = tuple(
        DepthInsert(
            depth=d, role=r, content="\n".join(a.content for a in acts),
            mandatory=any(a.mandatory for a in acts), activations=tuple(acts),
        )
        for (d, r), acts in sorted(depth.items(), key=lambda kv: (kv[0][0], kv[0][1].st))
    )
    return LorePlacement(
        before="\n".join(lists[Position.BEFORE_CHAR]),
        after="\n".join(lists[Position.AFTER_CHAR]),
        an_top="\n".join(lists[Position.AN_TOP]),
        an_bottom="\n".join(lists[Position.AN_BOTTOM]),
        at_depth=inserts,
        examples_top=tuple(lists[Position.EM_TOP]),
        examples_bottom=tuple(lists[Position.EM_BOTTOM]),
        outlets={k: "\n".join(v) for k, v in outlets.items()},
    )
