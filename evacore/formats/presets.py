"""Read and write SillyTavern presets: instruct, context, system prompt and reasoning templates.

Must not: migrate, validate or apply template fields (the instruct engine does); every field
read is written back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from evacore.errors import ImportInvalid
from evacore.formats._json import dump_pretty, load_json_bytes
from evacore.formats.limits import DEFAULT_LIMITS, Limits

__all__ = ["Preset", "PresetKind", "detect_preset_kind", "read_preset", "write_preset"]

PresetKind = Literal["instruct", "context", "sysprompt", "reasoning", "unknown"]
SIGNATURES: dict[str, tuple[str, ...]] = {
    "instruct": ("input_sequence", "output_sequence"),
    "context": ("story_string",),
    "sysprompt": ("content",),
    "reasoning": ("prefix", "suffix", "separator"),
}
MASTER_KEYS = ("instruct", "context", "sysprompt", "reasoning", "preset")
_EXPECTED = (
    "expected a SillyTavern instruct template (name, input_sequence, output_sequence), "
    "context template (name, story_string), system prompt (name, content), reasoning "
    "template (name, prefix, suffix, separator), or a master export object keyed "
    "instruct/context/sysprompt/reasoning/preset"
)


@dataclass
class Preset:
    """One preset; `data` is the whole JSON object as read (including `name`)."""

    kind: PresetKind
    name: str
    data: dict[str, Any]


def detect_preset_kind(obj: dict[str, Any]) -> PresetKind | None:
    """The template kind whose signature keys `obj` has; None when none; error when several."""
    matches = [kind for kind, keys in SIGNATURES.items() if all(key in obj for key in keys)]
    if len(matches) > 1:
        raise ImportInvalid(f"ambiguous preset: it looks like {' and '.join(matches)}; {_EXPECTED}")
    return matches[0] if matches else None  # type: ignore[return-value]


def _named(kind: PresetKind, obj: dict[str, Any], where: str) -> Preset:
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ImportInvalid(f"the {kind} template{where} has no 'name'")
    return Preset(kind=kind, name=name, data=obj)


def _master(obj: dict[str, Any]) -> list[Preset] | None:
    if not obj or not all(isinstance(v, dict) for v in obj.values()):
        return None
    if not any(key in MASTER_KEYS for key in obj):
        return None
    presets: list[Preset] = []
    for key, member in obj.items():
        where = f" in the master export key {key!r}"
        if key in SIGNATURES:
            kind = detect_preset_kind(member)
            if kind != key:
                raise ImportInvalid(
                    f"the master export key {key!r} does not hold a valid {key} preset")
            presets.append(_named(kind, member, where))
        else:
            name = member.get("name")
            presets.append(Preset("unknown", name if isinstance(name, str) and name else key,
                                  member))
    return presets


def read_preset(data: bytes | dict[str, Any], limits: Limits | None = None) -> list[Preset]:
    """Read one preset file (or a master export holding several) into Presets."""
    limits = limits or DEFAULT_LIMITS
    obj = data if isinstance(data, dict) else load_json_bytes(
        data, limits, "the preset JSON", max_bytes=limits.max_text_bytes)
    if not isinstance(obj, dict):
        raise ImportInvalid(f"a preset must be a JSON object; {_EXPECTED}")
    kind = detect_preset_kind(obj)
    if kind is not None:
        return [_named(kind, obj, "")]
    presets = _master(obj)
    if presets is None:
        raise ImportInvalid(f"unrecognised preset; {_EXPECTED}")
    return presets


def write_preset(preset: Preset) -> bytes:
    """The preset as SillyTavern JSON (4-space indent), every field kept, `name` from the Preset."""
    data = dict(preset.data)
    if preset.kind != "unknown" or "name" in data:
        data["name"] = preset.name
    return dump_pretty(data)
