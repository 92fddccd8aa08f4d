"""Lorebook data: entries with every SillyTavern World Info field, books, global settings (R2.4).

Must not: parse files (formats/worldinfo.py does) or scan text (scan.py does).
Defaults are SillyTavern's. Records are frozen; build changed copies with `dataclasses.replace`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

Number = int | float

MAX_SCAN_DEPTH = 1000
"""SillyTavern caps every scan depth at this many messages."""


class Position(enum.Enum):
    """Where an activated entry goes; `.st` is SillyTavern's numeric `position`."""

    BEFORE_CHAR = "before_char"
    AFTER_CHAR = "after_char"
    AN_TOP = "an_top"
    AN_BOTTOM = "an_bottom"
    AT_DEPTH = "at_depth"
    EM_TOP = "em_top"
    EM_BOTTOM = "em_bottom"
    OUTLET = "outlet"

    @property
    def st(self) -> int:
        return _POSITION_ORDER.index(self)

    @classmethod
    def from_st(cls, value: object) -> Position | int:
        """Known ST numbers and names become a Position; an unknown number stays an int."""
        if isinstance(value, Position):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            for pos in cls:
                if pos.value == text:
                    return pos
            if text.lstrip("-").isdigit():
                value = int(text)
            else:
                return cls.BEFORE_CHAR
        if value is None:
            return cls.BEFORE_CHAR
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return cls.BEFORE_CHAR
        num = int(value)
        if 0 <= num < len(_POSITION_ORDER):
            return _POSITION_ORDER[num]
        return num


_POSITION_ORDER: tuple[Position, ...] = tuple(Position)


class Role(enum.Enum):
    """Message role of an at-depth insertion; `.st` is SillyTavern's number."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"

    @property
    def st(self) -> int:
        return _ROLE_ORDER.index(self)

    @classmethod
    def from_st(cls, value: object) -> Role:
        if isinstance(value, Role):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            for role in cls:
                if role.value == text:
                    return role
            value = int(text) if text.isdigit() else 0
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            num = int(value)
            if 0 <= num < len(_ROLE_ORDER):
                return _ROLE_ORDER[num]
        return cls.SYSTEM


_ROLE_ORDER: tuple[Role, ...] = tuple(Role)


class SelectiveLogic(enum.IntEnum):
    """How secondary keys combine with a primary match."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class CharacterStrategy(enum.IntEnum):
    """How global and character books are merged (chat and persona books always go first)."""

    EVENLY = 0
    CHARACTER_FIRST = 1
    GLOBAL_FIRST = 2

    @classmethod
    def parse(cls, value: object) -> CharacterStrategy:
        if isinstance(value, CharacterStrategy):
            return value
        if isinstance(value, str):
            text = value.strip().lower().replace("-", "_")
            for item in cls:
                if item.name.lower() == text:
                    return item
            if text.isdigit():
                value = int(text)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2:
            return cls(value)
        raise ValueError(f"unknown character strategy {value!r}")


GENERATION_TYPES: tuple[str, ...] = (
    "normal", "continue", "impersonate", "swipe", "regenerate", "quiet",
)
"""Values of `LoreEntry.triggers` and of `scan(generation_type=...)`."""


@dataclass(frozen=True)
class CharacterFilter:
    """Limit an entry to (or, with `is_exclude`, away from) characters by file name or tag."""

    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    is_exclude: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        object.__setattr__(self, "tags", tuple(str(t) for t in self.tags))


@dataclass(frozen=True)
class LoreEntry:
    """One World Info entry. Field names are SillyTavern's in snake_case; `extra` keeps
    every field this model does not know, verbatim, so an export gives it back."""

    uid: int = 0
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    comment: str = ""
    content: str = ""
    constant: bool = False
    vectorized: bool = False
    selective: bool = True
    selective_logic: SelectiveLogic = SelectiveLogic.AND_ANY
    add_memo: bool = False
    order: Number = 100
    position: Position | int = Position.BEFORE_CHAR
    disable: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: bool | int = 0
    probability: Number | None = 100
    use_probability: bool = True
    depth: int = 4
    role: Role = Role.SYSTEM
    group: str = ""
    group_override: bool = False
    group_weight: Number = 100
    use_group_scoring: bool | None = None
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    automation_id: str = ""
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    display_index: int | None = None
    triggers: tuple[str, ...] = ()
    character_filter: CharacterFilter | None = None
    outlet_name: str = ""
    mandatory: bool = False
    """Ours (SillyTavern's `ignoreBudget`): never cut by a budget; later stages protect it."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "keys", tuple(str(k) for k in self.keys))
        set_(self, "secondary_keys", tuple(str(k) for k in self.secondary_keys))
        set_(self, "triggers", tuple(str(t) for t in self.triggers))
        set_(self, "selective_logic", _logic(self.selective_logic))
        if not isinstance(self.position, Position):
            set_(self, "position", Position.from_st(self.position))
        if not isinstance(self.role, Role):
            set_(self, "role", Role.from_st(self.role))
        if isinstance(self.character_filter, Mapping):
            set_(self, "character_filter", _filter_from(self.character_filter))

    @property
    def delay_level(self) -> int:
        """The recursion level this entry waits for: 0 = none, `True` = 1."""
        value = self.delay_until_recursion
        if value is True:
            return 1
        if not value:
            return 0
        return int(value)


def _logic(value: object) -> SelectiveLogic:
    try:
        return SelectiveLogic(int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return SelectiveLogic.AND_ANY


def _filter_from(obj: Mapping[str, Any]) -> CharacterFilter:
    return CharacterFilter(
        names=tuple(obj.get("names") or ()),
        tags=tuple(obj.get("tags") or ()),
        is_exclude=bool(obj.get("is_exclude", obj.get("isExclude", False))),
    )


@dataclass(frozen=True)
class Lorebook:
    """A named list of entries plus the character-book fields honoured per book:
    `scan_depth` (replaces the global depth for its entries), `token_budget` (tokens its
    entries may use in one scan) and `recursive_scanning` (None = global setting)."""

    name: str = ""
    entries: tuple[LoreEntry, ...] = ()
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    description: str | None = None
    extensions: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))

    def entry(self, uid: int) -> LoreEntry | None:
        for item in self.entries:
            if item.uid == uid:
                return item
        return None


@dataclass(frozen=True)
class WorldInfoSettings:
    """Global World Info settings under SillyTavern's names (SPEC §13 "Lorebook settings")."""

    depth: int = 2
    """Messages scanned, newest first (`world_info_depth`)."""
    budget: Number = 25
    """Share of the context, in %, that activated entries may use; above 100 resets to 25."""
    budget_cap: int = 0
    """Absolute token cap on the budget; 0 = off."""
    min_activations: int = 0
    """Widen the scan one message at a time until this many entries are active; 0 = off."""
    min_activations_depth_max: int = 0
    """Stop widening past this depth; 0 = up to the chat length."""
    max_recursion_steps: int = 0
    """Maximum scan passes; 0 = unlimited."""
    recursive: bool = False
    """Activated entries' text is scanned again for more keys."""
    include_names: bool = True
    """Messages are scanned as "Name: text"."""
    case_sensitive: bool = False
    match_whole_words: bool = False
    use_group_scoring: bool = False
    overflow_alert: bool = False
    """Report a budget overflow as a warning in diagnostics."""
    character_strategy: CharacterStrategy = CharacterStrategy.CHARACTER_FIRST

    def __post_init__(self) -> None:
        if float(self.budget) > 100:
            object.__setattr__(self, "budget", 25)
        if not isinstance(self.character_strategy, CharacterStrategy):
            object.__setattr__(
                self, "character_strategy", CharacterStrategy.parse(self.character_strategy)
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorldInfoSettings:
        """Build from our names or SillyTavern's `world_info_*` names; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = key.removeprefix("world_info_")
            if name in names and value is not None:
                values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.name.lower() if isinstance(value, enum.Enum) else value
        return out

