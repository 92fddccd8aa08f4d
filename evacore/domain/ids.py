"""Identifiers and timestamps: sortable ids (time-ordered hex) and aware UTC times.

Must not: depend on anything but the standard library.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def new_id() -> str:
    """A 24-hex-char id whose first 12 chars are the creation time in ms: sorts by creation."""
    return f"{int(time.time() * 1000):012x}{os.urandom(6).hex()}"


def utcnow() -> datetime:
    return datetime.now(UTC)
