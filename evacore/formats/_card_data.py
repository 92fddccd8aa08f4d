"""Map a card JSON object (V1, Pygmalion, V2, V3) to V3-shaped data and back to envelopes.

Must not: deal with containers (PNG, CHARX) or asset bytes; it works on plain JSON values.
"""

from __future__ import annotations

import json
from typing import Any

from evacore.errors import ImportInvalid

V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
TEXT_FIELDS = V1_FIELDS + (
    "creator_notes", "system_prompt", "post_history_instructions", "creator", "character_version",
)
LIST_FIELDS = ("alternate_greetings", "group_only_greetings", "tags")
V3_ONLY_FIELDS = (
    "group_only_greetings", "nickname", "creator_notes_multilingual", "source", "assets",
    "creation_date", "modification_date",
)
ENVELOPE_KEYS = ("spec", "spec_version", "data")
PYGMALION = {
    "char_name": "name", "char_persona": "description", "char_greeting": "first_mes",
    "world_scenario": "scenario", "example_dialogue": "mes_example",
}
NOTES_FILLER = "Creator's notes go here."
SPECS = {"chara_card_v2": "v2", "chara_card_v3": "v3"}


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise ImportInvalid(f"card field {field!r} must be a string, got {type(value).__name__}")


def _text_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        if field == "tags":
            return [tag.strip() for tag in value.split(",") if tag.strip()]
        return [value] if value else []
    if isinstance(value, list):
        return [_text(item, field) for item in value]
    return [_text(value, field)]


def normalise(raw: dict[str, Any]) -> dict[str, Any]:
    """Fill V3 defaults and coerce field types; idempotent, unknown keys untouched."""
    data = dict(raw)
    for field in TEXT_FIELDS:
        data[field] = _text(data.get(field), field)
    for field in LIST_FIELDS:
        data[field] = _text_list(data.get(field), field)
    extensions = data.get("extensions")
    if extensions is None:
        data["extensions"] = {}
    elif not isinstance(extensions, dict):
        raise ImportInvalid("card field 'extensions' must be an object")
    return data


def _not_a_card(obj: dict[str, Any]) -> ImportInvalid:
    if "entries" in obj:
        return ImportInvalid("this is a lorebook / World Info file, not a character card")
    if "input_sequence" in obj or "story_string" in obj:
        return ImportInvalid("this is a SillyTavern preset, not a character card")
    return ImportInvalid(
        "the JSON object is not a character card: expected 'spec' "
        "(chara_card_v2/chara_card_v3), or 'name' (V1), or 'char_name' (Pygmalion)"
    )


def _from_v1(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    pygmalion = "char_name" in obj
    raw: dict[str, Any] = {field: obj.get(field) for field in V1_FIELDS}
    consumed = set(V1_FIELDS)
    if pygmalion:
        for source, target in PYGMALION.items():
            if source in obj:
                raw[target] = obj[source]
                consumed.add(source)
    notes = obj.get("creatorcomment", obj.get("creator_notes"))
    if isinstance(notes, str):
        raw["creator_notes"] = notes.replace(NOTES_FILLER, "")
    if "tags" in obj:
        raw["tags"] = obj["tags"]
    extensions = {key: obj[key] for key in ("talkativeness", "fav") if key in obj}
    raw["extensions"] = extensions
    extra_top = {k: v for k, v in obj.items() if k not in consumed}
    return raw, extra_top


def split_card_object(obj: Any, warnings: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(source spec, raw V3-shaped data before normalising, extra top-level keys)."""
    if not isinstance(obj, dict):
        kind = "an array" if isinstance(obj, list) else type(obj).__name__
        raise ImportInvalid(f"a card must be a JSON object, got {kind}")
    if "spec" not in obj:
        if isinstance(obj.get("char_name"), str) or isinstance(obj.get("name"), str):
            raw, extra_top = _from_v1(obj)
            return "v1", raw, extra_top
        raise _not_a_card(obj)
    spec_name = obj["spec"]
    spec = SPECS.get(spec_name) if isinstance(spec_name, str) else None
    if spec is None:
        raise ImportInvalid(
            f"unsupported card spec {spec_name!r}; expected 'chara_card_v2' or 'chara_card_v3'"
        )
    data = obj.get("data")
    if not isinstance(data, dict):
        raise ImportInvalid(f"a {spec_name} card needs a 'data' object")
    _check_version(spec, obj.get("spec_version"), warnings)
    extra_top = {k: v for k, v in obj.items() if k not in ENVELOPE_KEYS and k not in V1_FIELDS}
    return spec, data, extra_top


def _check_version(spec: str, version: Any, warnings: list[str]) -> None:
    try:
        number = float(version)
    except (TypeError, ValueError):
        warnings.append(f"spec_version {version!r} is not a number")
        return
    if spec == "v3" and number > 3.0:
        warnings.append(f"spec_version {version!r} is newer than 3.0; imported as 3.0")
    elif (spec == "v3") != (number >= 3.0):
        warnings.append(f"spec_version {version!r} does not match the spec; the spec wins")


def envelope(spec_name: str, version: str, data: dict[str, Any],
             extra_top: dict[str, Any]) -> dict[str, Any]:
    """The card object: envelope, V1 mirror fields (from data), then extra top-level keys."""
    obj: dict[str, Any] = {"spec": spec_name, "spec_version": version, "data": data}
    for field in V1_FIELDS:
        obj[field] = data.get(field, "")
    for key, value in extra_top.items():
        obj.setdefault(key, value)
    return obj


def strip_decorators(content: str) -> str:
    """Remove a leading `@@decorator` block (V3 lorebook syntax) from entry content."""
    if not content.startswith("@@"):
        return content
    lines = content.split("\n")
    index = 0
    while index < len(lines) and lines[index].startswith("@@"):
        index += 1
    return "\n".join(lines[index:])


def v2_backfill(data: dict[str, Any]) -> dict[str, Any]:
    """V2 `data`: the V3 data without V3-only fields, lorebook decorators stripped."""
    out = {k: v for k, v in data.items() if k not in V3_ONLY_FIELDS}
    book = out.get("character_book")
    if isinstance(book, dict) and isinstance(book.get("entries"), list):
        entries = []
        for entry in book["entries"]:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str):
                entry = {**entry, "content": strip_decorators(entry["content"])}
            entries.append(entry)
        out["character_book"] = {**book, "entries": entries}
    return out
