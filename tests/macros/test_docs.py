"""R2.2: every built-in macro and alias is documented in docs/macros.md."""

from __future__ import annotations

from pathlib import Path

from evacore.macros import MacroEngine

DOC = Path(__file__).resolve().parents[2] / "docs" / "macros.md"


def test_r2_2_every_builtin_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [
        name
        for definition in MacroEngine().definitions()
        for name in (definition.name, *definition.aliases)
        if f"`{name}`" not in text
    ]
    assert missing == []
