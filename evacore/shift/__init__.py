"""Context shifting (R2.7): fit counted prompt elements into the token budget, cutting
history in chunks so the kept prefix stays stable across turns.

Must not: import the pipeline, count tokens or persist the anchor (the caller does).
"""

from evacore.shift.fit import DEFAULT_CHUNK, FitAnchor, FitItem, FitResult, Removed, fit
from evacore.shift.window import select_history

__all__ = [
    "DEFAULT_CHUNK",
    "FitAnchor",
    "FitItem",
    "FitResult",
    "Removed",
    "fit",
    "select_history",
]
