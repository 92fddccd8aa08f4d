"""SillyTavern World Info files, `lorebook_v3` objects and card `character_book`s ⇄ `Lorebook`
(reference formats.md §2).

Must not: scan (evacore.lore does) or touch a database; unknown fields are kept verbatim in
`extra` and written back where they were found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evacore.errors import ImportInvalid
from evacore.formats._json import load_json_bytes
from evacore.formats.limits import DEFAULT_LIMITS, Limits
from evacore.lore.model import CharacterFilter, Lorebook, LoreEntry, Position, Role

__all__ = ["from_character_book", "load_world_info_file", "read_world_info", "to_character_book",
           "write_world_info"]

# (model field, ST World Info name, card-book extension name or None, kind, default)
_FIELDS: tuple[tuple[str, str, str | None, str, Any], ...] = (
    ("uid", "uid", None, "int", 0),
    ("keys", "key", None, "strs", ()),
    ("secondary_keys", "keysecondary", None, "strs", ()),
    ("comment", "comment", None, "str", ""),
    ("content", "content", None, "str", ""),
    ("constant", "constant", None, "bool", False),
    ("vectorized", "vectorized", "vectorized", "bool", False),
    ("selective", "selective", None, "bool", True),
    ("selective_logic", "selectiveLogic", "selectiveLogic", "int", 0),
    ("add_memo", "addMemo", None, "bool", False),
    ("order", "order", None, "num", 100),
    ("position", "position", "position", "position", 0),
    ("disable", "disable", None, "bool", False),
    ("exclude_recursion", "excludeRecursion", "exclude_recursion", "bool", False),
    ("prevent_recursion", "preventRecursion", "prevent_recursion", "bool", False),
    ("delay_until_recursion", "delayUntilRecursion", "delay_until_recursion", "level", 0),
    ("probability", "probability", "probability", "opt_num", 100),
    ("use_probability", "useProbability", "useProbability", "bool", True),
    ("depth", "depth", "depth", "int", 4),
    ("role", "role", "role", "role", 0),
    ("group", "group", "group", "str", ""),
    ("group_override", "groupOverride", "group_override", "bool", False),
    ("group_weight", "groupWeight", "group_weight", "num", 100),
    ("use_group_scoring", "useGroupScoring", "use_group_scoring", "opt_bool", None),
    ("scan_depth", "scanDepth", "scan_depth", "opt_int", None),
    ("case_sensitive", "caseSensitive", "case_sensitive", "opt_bool", None),
    ("match_whole_words", "matchWholeWords", "match_whole_words", "opt_bool", None),
    ("match_persona_description", "matchPersonaDescription", "match_persona_description", "bool", False),
    ("match_character_description", "matchCharacterDescription", "match_character_description", "bool", False),
    ("match_character_personality", "matchCharacterPersonality", "match_character_personality", "bool", False),
    ("match_character_depth_prompt", "matchCharacterDepthPrompt", "match_character_depth_prompt", "bool", False),
    ("match_scenario", "matchScenario", "match_scenario", "bool", False),
    ("match_creator_notes", "matchCreatorNotes", "match_creator_notes", "bool", False),
    ("automation_id", "automationId", "automation_id", "str", ""),
    ("sticky", "sticky", "sticky", "opt_int", None),
    ("cooldown", "cooldown", "cooldown", "opt_int", None),
    ("delay", "delay", "delay", "opt_int", None),
    ("display_index", "displayIndex", "display_index", "opt_int", None),
    ("triggers", "triggers", "triggers", "strs", ()),
    ("character_filter", "characterFilter", "character_filter", "filter", None),
    ("outlet_name", "outletName", "outlet_name", "str", ""),
    ("mandatory", "ignoreBudget", "ignore_budget", "bool", False),
)
_ST_NAMES = {st for _, st, _, _, _ in _FIELDS}
_BOOK_FIELDS = ("name", "description", "scan_depth", "token_budget", "recursive_scanning", "extensions")
_CARD_ENTRY_FIELDS = frozenset({
    "keys", "secondary_keys", "comment", "content", "constant", "selective", "insertion_order",
    "enabled", "position", "extensions", "id", "case_sensitive",
})


# -- value coercion ------------------------------------------------------------------------

def _bool(v: Any, default: Any) -> Any:
    if v is None:
        return default
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def _num(v: Any, default: Any) -> Any:
    if v is None or isinstance(v, bool):
        return default
    if isinstance(v, (int, float)):
        return v
    try:
        f = float(str(v).strip())
    except ValueError:
        return default
    return int(f) if f.is_integer() else f


def _int(v: Any, default: Any) -> Any:
    n = _num(v, None)
    return default if n is None else int(n)


def _strs(v: Any, default: Any, where: str) -> tuple[str, ...]:
    if v is None:
        return tuple(default)
    if isinstance(v, str):
        return tuple(part.strip() for part in v.split(",") if part.strip())
    if isinstance(v, (list, tuple)):
        out = []
        for item in v:
            if isinstance(item, (dict, list)):
                raise ImportInvalid(f"{where}: a key must be text, got {type(item).__name__}")
            if item is not None:
                out.append(str(item))
        return tuple(out)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (str(v),)
    raise ImportInvalid(f"{where}: expected a list of keys, got {type(v).__name__}")


def _level(v: Any, default: Any) -> Any:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    return _int(v, default)


def _filter(v: Any, where: str) -> CharacterFilter | None:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise ImportInvalid(f"{where}: characterFilter must be an object")
    return CharacterFilter(
        names=_strs(v.get("names"), (), where), tags=_strs(v.get("tags"), (), where),
        is_exclude=_bool(v.get("isExclude", v.get("is_exclude")), False),
    )


def _coerce(kind: str, v: Any, default: Any, where: str) -> Any:
    if kind == "bool":
        return _bool(v, default)
    if kind == "opt_bool":
        return None if v is None else _bool(v, None)
    if kind == "int":
        return _int(v, default)
    if kind == "opt_int":
        return _int(v, None)
    if kind in ("num", "opt_num"):
        return _num(v, default)
    if kind == "str":
        return default if v is None else str(v)
    if kind == "strs":
        return _strs(v, default, where)
    if kind == "level":
        return _level(v, default)
    if kind == "position":
        return Position.from_st(default if v is None else v)
    if kind == "role":
        return Role.from_st(default if v is None else v)
    if kind == "filter":
        return _filter(v, where)
    raise AssertionError(kind)


def _out(v: Any) -> Any:
    if isinstance(v, Position):
        return v.st
    if isinstance(v, Role):
        return v.st
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, CharacterFilter):
        return {"isExclude": v.is_exclude, "names": list(v.names), "tags": list(v.tags)}
    if hasattr(v, "value") and isinstance(v.value, int):
        return int(v)
    return v


# -- reading -------------------------------------------------------------------------------

def _load(data: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(data, Mapping):
        return data
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("cp1252", errors="replace")
    elif isinstance(data, str):
        text = data.lstrip("\ufeff")
    else:
        raise ImportInvalid(f"cannot read a lorebook from {type(data).__name__}")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ImportInvalid(f"the lorebook is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ImportInvalid("a lorebook must be a JSON object")
    return obj


def load_world_info_file(data: bytes, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The JSON object of an untrusted lorebook file (UTF-8, at most `max_text_bytes`); its
    entries are counted before it is parsed, so a book past `max_lore_entries` is TooLarge
    without being built."""
    obj = load_json_bytes(data, limits, "the lorebook", max_items=limits.max_lore_entries)
    if not isinstance(obj, dict):
        raise ImportInvalid("a lorebook must be a JSON object")
    return obj


def read_world_info(data: bytes | str | Mapping[str, Any], name: str | None = None) -> Lorebook:
    """Read an ST World Info file, a `{spec:"lorebook_v3", data}` object, a card's
    `character_book` (or a whole V2/V3 card JSON, for its book). `name` overrides the name
    found in the data."""
    obj = _load(data)
    if str(obj.get("spec", "")).startswith("chara_card_"):
        card_data = obj.get("data")
        book = card_data.get("character_book") if isinstance(card_data, Mapping) else None
        if not isinstance(book, Mapping):
            raise ImportInvalid("this character card has no `character_book`")
        return from_character_book(book, name=name)
    if obj.get("spec") == "lorebook_v3":
        inner = obj.get("data")
        if not isinstance(inner, Mapping):
            raise ImportInvalid("lorebook_v3: `data` must be an object")
        return from_character_book(inner, name=name)
    if "lorebookVersion" in obj:
        raise ImportInvalid("NovelAI lorebooks are not supported; export a World Info file")
    if obj.get("kind") == "memory":
        raise ImportInvalid("Agnai memory books are not supported; export a World Info file")
    if obj.get("type") == "risu":
        raise ImportInvalid("Risu lorebooks are not supported; export a World Info file")
    entries = obj.get("entries")
    if entries is None:
        raise ImportInvalid("not a lorebook: no `entries`")
    if isinstance(entries, list):
        looks_st = any(isinstance(e, Mapping) and "key" in e and "keys" not in e for e in entries)
        if not looks_st:
            return from_character_book(obj, name=name)
        items = [(str(i), e) for i, e in enumerate(entries)]
    elif isinstance(entries, Mapping):
        items = list(entries.items())
    else:
        raise ImportInvalid("`entries` must be an object keyed by uid or a list")
    out = []
    for key, raw in items:
        if not isinstance(raw, Mapping):
            raise ImportInvalid(f"entry {key!r} is not an object")
        out.append(_from_st_entry(raw, key))
    return _book(obj, tuple(out), name)


def _book(obj: Mapping[str, Any], entries: tuple[LoreEntry, ...], name: str | None) -> Lorebook:
    for key in ("scan_depth", "token_budget"):
        value = obj.get(key)
        if value is not None and _num(value, None) is None:
            raise ImportInvalid(f"lorebook: `{key}` must be a number, got {value!r}")
    ext = obj.get("extensions")
    extra = {k: v for k, v in obj.items() if k not in _BOOK_FIELDS and k != "entries"}
    if ext is not None and not isinstance(ext, Mapping):
        extra["extensions"] = ext
    recursive = obj.get("recursive_scanning")
    return Lorebook(
        name=name if name is not None else str(obj.get("name") or ""),
        entries=entries,
        scan_depth=_int(obj.get("scan_depth"), None),
        token_budget=_int(obj.get("token_budget"), None),
        recursive_scanning=None if recursive is None else _bool(recursive, None),
        description=None if obj.get("description") is None else str(obj["description"]),
        extensions=dict(ext) if isinstance(ext, Mapping) else {},
        extra=extra,
    )


def _from_st_entry(raw: Mapping[str, Any], key: str) -> LoreEntry:
    where = f"entry {key}"
    values: dict[str, Any] = {}
    for fname, st, _, kind, default in _FIELDS:
        values[fname] = _coerce(kind, raw.get(st), default, where)
    uid = _int(key, None)
    values["uid"] = uid if uid is not None else _int(raw.get("uid"), 0)
    if values["display_index"] is None:
        values["display_index"] = values["uid"]
    values["extra"] = {k: v for k, v in raw.items() if k not in _ST_NAMES}
    return LoreEntry(**values)


def from_character_book(obj: Mapping[str, Any], name: str | None = None) -> Lorebook:
    """A V2/V3 card `character_book` (or a `lorebook_v3` `data`) → Lorebook (formats §2.2)."""
    if not isinstance(obj, Mapping):
        raise ImportInvalid("a character book must be an object")
    if obj.get("spec") == "lorebook_v3" and isinstance(obj.get("data"), Mapping):
        obj = obj["data"]
    entries = obj.get("entries")
    if isinstance(entries, Mapping):
        entries = list(entries.values())
    if not isinstance(entries, list):
        raise ImportInvalid("character book: `entries` must be a list")
    used = {str(e.get("id")) for e in entries if isinstance(e, Mapping) and _int(e.get("id"), None) is not None}
    taken: set[int] = set()
    next_id = 0
    out = []
    for index, raw in enumerate(entries):
        if not isinstance(raw, Mapping):
            raise ImportInvalid(f"character book entry {index} is not an object")
        uid = _int(raw.get("id"), None)
        if uid is None or uid in taken:
            while str(next_id) in used or next_id in taken:
                next_id += 1
            uid = next_id
        taken.add(uid)
        out.append(_from_card_entry(raw, uid, index))
    return _book(obj, tuple(out), name)


def _from_card_entry(raw: Mapping[str, Any], uid: int, index: int) -> LoreEntry:
    where = f"character book entry {index}"
    ext_raw = raw.get("extensions")
    ext: Mapping[str, Any] = ext_raw if isinstance(ext_raw, Mapping) else {}
    values: dict[str, Any] = {}
    for fname, _, ext_name, kind, default in _FIELDS:
        if ext_name is not None:
            values[fname] = _coerce(kind, ext.get(ext_name), default, where)
    if ext.get("position") is None:
        values["position"] = Position.BEFORE_CHAR if raw.get("position") == "before_char" else Position.AFTER_CHAR
    top_case = None
    if values["case_sensitive"] is None and raw.get("case_sensitive") is not None:
        values["case_sensitive"] = top_case = _bool(raw.get("case_sensitive"), None)
    comment = "" if raw.get("comment") is None else str(raw["comment"])
    values.update(
        uid=uid,
        keys=_strs(raw.get("keys"), (), where),
        secondary_keys=_strs(raw.get("secondary_keys"), (), where),
        comment=comment,
        content="" if raw.get("content") is None else str(raw["content"]),
        constant=_bool(raw.get("constant"), False),
        selective=_bool(raw.get("selective"), False),
        order=_num(raw.get("insertion_order"), 100),
        disable=not _bool(raw.get("enabled"), True),
        add_memo=bool(comment),
    )
    if values["display_index"] is None:
        values["display_index"] = index
    known_ext = {n for _, _, n, _, _ in _FIELDS if n}
    extra = {k: v for k, v in raw.items() if k not in _CARD_ENTRY_FIELDS}
    if ext_raw is not None and not isinstance(ext_raw, Mapping):
        extra["extensions"] = ext_raw
    if raw.get("id") is not None and (_int(raw.get("id"), None) is None or
                                      _int(raw.get("id"), None) != uid):
        extra["id"] = raw["id"]  # not a number, or a duplicate renumbered here: kept as is
    if top_case is not None:
        # the card's own top-level field, kept there on export (SillyTavern reads only the
        # extension field, so moving it would change how SillyTavern reads the entry)
        extra["case_sensitive"] = raw["case_sensitive"]
    leftover = {k: v for k, v in ext.items() if k not in known_ext}
    if leftover:
        extra["extensions"] = leftover
    return LoreEntry(**values, extra=extra)


# -- writing -------------------------------------------------------------------------------

def _st_entry(entry: LoreEntry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fname, st, _, _, _ in _FIELDS:
        out[st] = _out(getattr(entry, fname))
    if entry.character_filter is None:
        del out["characterFilter"]
    if out["displayIndex"] is None:
        out["displayIndex"] = entry.uid
    for key, value in entry.extra.items():
        out.setdefault(key, value)
    return out


def write_world_info(book: Lorebook) -> bytes:
    """The book as an ST World Info file (`entries` keyed by uid); a re-read gives it back."""
    doc: dict[str, Any] = {"entries": {str(e.uid): _st_entry(e) for e in book.entries}}
    _book_fields(book, doc)
    return json.dumps(doc, ensure_ascii=False, indent=4).encode("utf-8")


def _book_fields(book: Lorebook, doc: dict[str, Any]) -> None:
    if book.name:
        doc["name"] = book.name
    if book.description is not None:
        doc["description"] = book.description
    for key in ("scan_depth", "token_budget", "recursive_scanning"):
        if getattr(book, key) is not None:
            doc[key] = getattr(book, key)
    if book.extensions:
        doc["extensions"] = book.extensions
    for key, value in book.extra.items():
        doc.setdefault(key, value)


def to_character_book(book: Lorebook) -> dict[str, Any]:
    """The book as a card `character_book` (formats §2.3), ST fields under `extensions`."""
    entries = []
    for e in book.entries:
        kept = e.extra.get("extensions")
        ext: dict[str, Any] = dict(kept) if isinstance(kept, Mapping) else {}
        for fname, _, ext_name, _, _ in _FIELDS:
            if ext_name is not None:
                ext[ext_name] = _out(getattr(e, fname))
        if e.character_filter is None:
            del ext["character_filter"]
        if ext["display_index"] is None:
            ext["display_index"] = e.uid
        if "case_sensitive" in e.extra and e.case_sensitive == _bool(e.extra["case_sensitive"],
                                                                      None):
            ext["case_sensitive"] = kept.get("case_sensitive") if isinstance(kept, Mapping) \
                else None
        card: dict[str, Any] = {
            "id": e.extra.get("id", e.uid),
            "keys": list(e.keys),
            "secondary_keys": list(e.secondary_keys),
            "comment": e.comment,
            "content": e.content,
            "constant": e.constant,
            "selective": e.selective,
            "insertion_order": e.order,
            "enabled": not e.disable,
            "position": "before_char" if e.position is Position.BEFORE_CHAR else "after_char",
            "use_regex": e.extra.get("use_regex", True),
            "extensions": ext,
        }
        for key, value in e.extra.items():
            if key not in ("extensions", "id"):
                card.setdefault(key, value)
        entries.append(card)
    doc: dict[str, Any] = {"name": book.name, "entries": entries, "extensions": dict(book.extensions)}
    _book_fields(book, doc)
    return doc

