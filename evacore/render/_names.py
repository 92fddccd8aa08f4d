"""The small macro subset rendering needs itself: `{{user}}`, `{{char}}`, `{{name}}`, `{{trim}}`.

Must not: grow into a macro engine (evacore.macros is that); callers pass `expand` for
everything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Expand = Callable[[str], str]

_USER = re.compile(r"\{\{user\}\}|<USER>", re.IGNORECASE)
_CHAR = re.compile(r"\{\{char\}\}|<BOT>|<CHAR>", re.IGNORECASE)
_NAME = re.compile(r"\{\{name\}\}", re.IGNORECASE)
_TRIM = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE)


def substitute_names(text: str, *, user: str, char: str, expand: Expand | None = None) -> str:
    """Replace `{{user}}`/`{{char}}` (and the legacy `<USER>`/`<BOT>`/`<CHAR>`), then `expand`."""
    if not text:
        return text
    text = _USER.sub(lambda _m: user, text)
    text = _CHAR.sub(lambda _m: char, text)
    if expand is not None:
        text = expand(text)
    return text


def fill_name(text: str, name: str) -> str:
    """Replace `{{name}}` (any case) with the speaker's name."""
    return _NAME.sub(lambda _m: name, text) if text else text


def apply_trim(text: str) -> str:
    """`{{trim}}` removes itself and the newlines right before and after it."""
    return _TRIM.sub("", text) if text else text
