"""The tokenizer profile contract and the `ceil(chars/3.35)` heuristic with its margin.

Must not: load vocab files or talk to a backend (see `local.py`, `remote.py`).
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Protocol, runtime_checkable

THREAD_THRESHOLD = 32_000
"""Texts longer than this (characters) are counted in a worker thread by `count_async`."""


@runtime_checkable
class TokenizerProfile(Protocol):
    """Counts tokens for one connection. `name` identifies the vocabulary (cache key)."""

    name: str
    exact: bool
    """True when counts come from the model's real tokenizer."""

    def count(self, text: str) -> int: ...

    async def count_async(self, text: str) -> int: ...


class _SyncProfile:
    """Base for profiles whose `count` is local CPU work."""

    name: str
    exact: bool

    def count(self, text: str) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    async def count_async(self, text: str) -> int:
        if len(text) > THREAD_THRESHOLD:
            return await asyncio.to_thread(self.count, text)
        return self.count(text)


CHARS_PER_TOKEN = 3.35
"""SillyTavern's no-tokenizer estimate for Latin-script text."""
HEURISTIC_MARGIN = 1.10
"""Safety factor on top of the per-character estimate (measurements: tokenize/README.md)."""
DIGIT_WEIGHT = 0.5
"""Tokens per ASCII digit (numbers split into 1-3 digit tokens: `06:00` is three)."""
PUNCT_WEIGHT = 0.5
"""Tokens per ASCII punctuation character (code and lists are dense in these)."""
NON_ASCII_WEIGHT = 0.65
"""Tokens per character for BMP letters outside ASCII (Cyrillic, Greek, accented Latin…)."""
CJK_WEIGHT = 1.35
"""Tokens per character for Han, kana, Hangul and fullwidth forms."""
ASTRAL_WEIGHT = 2.0
"""Tokens per character above U+FFFF (emoji, rare CJK): several byte tokens each."""


_CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_DIGIT_OR_PUNCT = re.compile(r"[!-@\[-`{-~]")  # ASCII punctuation and digits
_DIGIT = re.compile("[0-9]")


def heuristic_estimate(text: str, margin: float = HEURISTIC_MARGIN) -> int:
    """`ceil(margin × Σ weight(char))`: ASCII letters and spaces 1/3.35 (SillyTavern's
    chars/3.35), ASCII digits and punctuation 0.5, other BMP characters 0.65, CJK 1.35,
    characters above U+FFFF 2.0. Plain prose is chars/3.35 × margin; the other weights stop
    the 2-4× undercount of chars/3.35 on numbers, code, Cyrillic and CJK text.
    """
    if not text:
        return 0
    dense = len(_DIGIT_OR_PUNCT.findall(text))
    digits = len(_DIGIT.findall(text)) if dense else 0
    punct = dense - digits
    if text.isascii():
        cjk = astral = other = 0
        ascii_plain = len(text) - dense
    else:
        cjk = len(_CJK.findall(text))
        astral = len(_ASTRAL.findall(text))
        ascii_plain = len(text.encode("ascii", "ignore")) - dense
        other = len(text) - ascii_plain - dense - cjk - astral
    raw = (
        ascii_plain / CHARS_PER_TOKEN
        + digits * DIGIT_WEIGHT
        + punct * PUNCT_WEIGHT
        + other * NON_ASCII_WEIGHT
        + cjk * CJK_WEIGHT
        + astral * ASTRAL_WEIGHT
    )
    return math.ceil(margin * raw)


class HeuristicProfile(_SyncProfile):
    """The labelled fallback: never exact, calibrated never to undercount (see tests)."""

    exact = False

    def __init__(self, margin: float = HEURISTIC_MARGIN) -> None:
        self.margin = margin
        self.name = "heuristic" if margin == HEURISTIC_MARGIN else f"heuristic@{margin:g}"

    def count(self, text: str) -> int:
        return heuristic_estimate(text, self.margin)
