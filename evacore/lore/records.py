"""Inputs and outputs of a lorebook scan: sourced books, chat messages, character facts,
activations, cuts and the scan result.

Must not: hold scan logic; these are plain records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from evacore.lore.model import Lorebook, LoreEntry, Position, Role
from evacore.lore.timed import TimedState

Source = Literal["chat", "persona", "global", "character"]
SOURCES: tuple[str, ...] = ("chat", "persona", "global", "character")


@dataclass(frozen=True)
class SourcedBook:
    """A book and where it comes from: the chat, the persona, the global selection or the
    character (card book or linked world)."""

    book: Lorebook
    source: Source

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown lorebook source {self.source!r}")


@dataclass(frozen=True)
class ScanMessage:
    """One chat message, oldest first in the sequence given to `scan` (newest LAST).

    System (narrator/hidden) messages are left out of the scan, as in SillyTavern.
    """

    name: str
    text: str
    is_user: bool = False
    is_system: bool = False


@dataclass(frozen=True)
class CharacterInfo:
    """The active character, for character filters and the `match_*` extra haystacks."""

    name: str
    filename: str | None = None
    """Avatar file name without extension; character filters compare `names` to this
    (falling back to `name`), like SillyTavern."""
    tags: tuple[str, ...] = ()
    description: str = ""
    personality: str = ""
    depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""

    @property
    def filter_name(self) -> str:
        return self.filename or self.name


@dataclass(frozen=True)
class Activation:
    """An entry that goes into the prompt, in final insertion order.

    `position` says where; `depth`/`role` matter for `Position.AT_DEPTH` (one insertion
    per (depth, role), messages from the end), `outlet_name` for `Position.OUTLET`.
    An `int` position is an unknown SillyTavern value: nothing is inserted for it.
    """

    entry: LoreEntry
    book_name: str
    source: Source
    position: Position | int
    depth: int
    role: Role
    order: int | float
    content: str
    outlet_name: str
    mandatory: bool
    reasons: list[str]
    recursion_level: int
    """Scan pass that activated it: 0 = first pass, n = n-th later pass (recursion or
    min-activations widening)."""
    tokens: int = 0

    @property
    def uid(self) -> int:
        return self.entry.uid


CutReason = Literal[
    "budget", "book_budget", "group", "probability", "cooldown", "delay",
    "delay_until_recursion", "exclude_recursion", "character_filter", "trigger",
    "disabled", "decorator", "empty",
]


@dataclass(frozen=True)
class Cut:
    """An entry whose keys (or constant/sticky/decorator) would have activated it, left out."""

    entry: LoreEntry
    book_name: str
    source: Source
    reason: CutReason
    detail: str = ""

    @property
    def uid(self) -> int:
        return self.entry.uid


@dataclass(frozen=True)
class ScanResult:
    activated: list[Activation]
    cut: list[Cut]
    timed_state: TimedState
    """The chat's timed-effect records after this scan: persist it with the chat."""
    seed: int
    diagnostics: dict[str, Any] = field(default_factory=dict)
