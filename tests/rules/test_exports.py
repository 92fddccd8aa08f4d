"""The package's public names: `__all__` lists exactly what `evacore.rules` offers."""

from __future__ import annotations

import evacore.rules


def test_rules_public_names_all_import() -> None:
    for name in evacore.rules.__all__:
        assert getattr(evacore.rules, name) is not None
    public = {n for n in vars(evacore.rules) if not n.startswith("_")} - {
        "calibration",
        "corpus",
        "patterns",
        "engine",
        "model",
        "probe",
        "seeds",
        "service",
        "target",
        "telemetry",
    }
    assert public == set(evacore.rules.__all__)
