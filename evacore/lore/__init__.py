"""Lorebook engine: SillyTavern World Info semantics (R2.4) — model, scan, timed effects, placement.

Must not: import pipeline, storage or HTTP code; callers pass books and chat in, get
activations out. The running core's book cache, which reads books from storage for stage 4,
is `evacore/services/lore.py`.
"""

from evacore.lore.model import (
    CharacterFilter,
    CharacterStrategy,
    Lorebook,
    LoreEntry,
    Position,
    Role,
    SelectiveLogic,
    WorldInfoSettings,
)
from evacore.lore.placement import LorePlacement, place
from evacore.lore.records import (
    Activation,
    CharacterInfo,
    Cut,
    ScanMessage,
    ScanResult,
    SourcedBook,
)
from evacore.lore.scan import clear_index_cache, compute_budget, scan
from evacore.lore.timed import TimedRecord, TimedState

__all__ = [
    "Activation",
    "CharacterFilter",
    "CharacterInfo",
    "CharacterStrategy",
    "Cut",
    "LoreEntry",
    "LorePlacement",
    "Lorebook",
    "Position",
    "Role",
    "ScanMessage",
    "ScanResult",
    "SelectiveLogic",
    "SourcedBook",
    "TimedRecord",
    "TimedState",
    "WorldInfoSettings",
    "clear_index_cache",
    "compute_budget",
    "place",
    "scan",
]
