"""Data classes for an imported character card and its assets.

Must not: parse or write files (cards.py does); it only holds the normalised card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CARD_SPECS = ("v1", "v2", "v3")


@dataclass
class CardAsset:
    """One V3 asset descriptor; `data` holds the bytes when the file carried them."""

    name: str
    type: str
    ext: str
    uri: str
    data: bytes | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown keys of the descriptor, written back as they were."""


def default_assets() -> list[CardAsset]:
    """The V3 rule for a card without `assets`: one main icon, the card's own image."""
    return [CardAsset(name="main", type="icon", ext="png", uri="ccdefault:")]


@dataclass
class Card:
    """A character card of any spec, normalised to the V3 `data` shape.

    Two cards compare equal when `data` and `extra_top` are equal; the source spec, the
    image bytes, assets, extra archive files and warnings are not compared.
    """

    spec: str = field(compare=False)
    """The source spec: "v1", "v2" or "v3"."""
    data: dict[str, Any]
    """V3-shaped `data` (every unknown field kept); `assets` lives in `Card.assets` instead."""
    extra_top: dict[str, Any] = field(default_factory=dict)
    """Unknown top-level keys of the envelope (V1 mirror fields excluded: they are re-derived)."""
    image: bytes | None = field(default=None, compare=False, repr=False)
    """The card image (for a PNG card: the PNG with its card chunks removed)."""
    assets: list[CardAsset] = field(default_factory=default_assets, compare=False)
    extra_files: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    """CHARX entries that are neither card.json nor a referenced asset (e.g. Risu x_meta)."""
    warnings: list[str] = field(default_factory=list, compare=False)
    """Things the reader tolerated (trailing bytes, fallbacks, replaced surrogates, …)."""

    @property
    def name(self) -> str:
        return str(self.data.get("name", ""))
