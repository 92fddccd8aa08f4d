"""Validate and store SillyTavern presets (instruct, context, system prompt, reasoning).

Must not: parse files (formats/presets.py does) or apply templates (render/ does).
A preset with the kind and name of a stored one replaces its data (same id), as
SillyTavern overwrites a preset of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import ImportInvalid
from evacore.formats.presets import Preset as PresetFile
from evacore.importing._rows import checked_name
from evacore.store.presets import find_preset
from evacore.store.tables import Preset

KINDS = ("instruct", "context", "sysprompt", "reasoning", "unknown")
"""`unknown` holds other members of a SillyTavern master export (e.g. sampler settings)."""


def validate_preset(kind: str, data: dict[str, Any]) -> None:
    """Raise ImportInvalid when `data` is not a usable preset of `kind`."""
    if kind not in KINDS:
        raise ImportInvalid(f"unknown preset kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not isinstance(data, dict):
        raise ImportInvalid("a preset must be a JSON object")
    from evacore.render.instruct import ContextTemplate, InstructTemplate, SystemPromptPreset

    if kind == "instruct":
        InstructTemplate.from_st(data)
    elif kind == "context":
        ContextTemplate.from_st(data)
    elif kind == "sysprompt":
        SystemPromptPreset.from_st(data)
    elif kind == "reasoning":
        for key in ("prefix", "suffix", "separator"):
            if not isinstance(data.get(key), str):
                raise ImportInvalid(f"invalid reasoning preset: '{key}' must be a string")


@dataclass
class StoredPreset:
    preset: Preset
    replaced: bool


async def store_preset(session: AsyncSession, kind: str, name: str,
                       data: dict[str, Any]) -> StoredPreset:
    """Validate and insert (or replace by kind and name) one preset."""
    name = checked_name(name, 300, "the preset name")
    if not name.strip():
        raise ImportInvalid("a preset needs a non-empty name")
    validate_preset(kind, data)
    body = dict(data)
    if kind != "unknown" or "name" in body:
        body["name"] = name
    existing = await find_preset(session, kind, name)
    if existing is not None:
        existing.data = body
        await session.flush()
        return StoredPreset(existing, True)
    row = Preset(kind=kind, name=name, data=body)
    session.add(row)
    await session.flush()
    return StoredPreset(row, False)


async def store_presets(session: AsyncSession, presets: list[PresetFile]) -> list[StoredPreset]:
    """Store every preset of one file (a master export holds several)."""
    for p in presets:
        validate_preset(p.kind, p.data)
    return [await store_preset(session, p.kind, p.name, p.data) for p in presets]


def preset_file(row: Preset) -> PresetFile:
    kind = row.kind if row.kind in KINDS else "unknown"
    return PresetFile(kind=kind, name=row.name, data=dict(row.data or {}))  # type: ignore[arg-type]
