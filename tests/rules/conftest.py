"""Helpers for the rules tests: rules built through validation, and a logger that records."""

from __future__ import annotations

from typing import Any

import pytest

from evacore.rules import Rule, validate_rule


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def events(self, level: str | None = None) -> list[str]:
        return [event for lvl, event, _ in self.lines if level in (None, lvl)]


@pytest.fixture
def log() -> RecordingLog:
    return RecordingLog()


def make(name: str, scope: str = "text", text: str | None = None, **fields: Any) -> Rule:
    return validate_rule(
        {"name": name, "scope": scope, "text": text or f"text of {name}", **fields}
    )
