"""Guarded JSON decoding for imports: UTF-8 only, depth checked before parsing, no NaN.

Must not: know about cards, presets or chats; it only turns bytes into plain JSON values.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evacore.errors import ImportInvalid, TooLarge
from evacore.formats.limits import Limits

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_BRACKET_OUTSIDE_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([\[\]{}])', re.DOTALL)
"""Matches strings (group empty) and brackets (group = the bracket): joined, `findall`'s
groups are the document's brackets in order, found at C speed."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_utf8(data: bytes, what: str) -> str:
    """Decode UTF-8 text (a leading BOM is dropped); anything else is an import error."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ImportInvalid(f"{what} is UTF-16 text; only UTF-8 is accepted")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportInvalid(
            f"{what} is not valid UTF-8 (bad byte at offset {exc.start})", offset=exc.start
        ) from None


def check_depth(text: str, max_depth: int, what: str, max_items: int | None = None,
                items_depth: int = 4) -> None:
    """Raise if arrays/objects nest deeper than `max_depth`, without recursing; with
    `max_items`, also (TooLarge) if a container within `items_depth` levels of the top holds
    more than that many arrays/objects (a lorebook's entries), before anything is built."""
    containers = text.count("[") + text.count("{")
    if containers <= max_depth and (max_items is None or containers <= max_items):
        return
    depth = 0
    counts = [0]
    cap = max_items if max_items is not None else -1
    for bracket in "".join(_BRACKET_OUTSIDE_STRINGS.findall(text)):
        if bracket in "[{":
            depth += 1
            if depth > max_depth:
                raise ImportInvalid(
                    f"{what} nests JSON deeper than {max_depth} levels", max_depth=max_depth
                )
            if cap >= 0 and depth <= items_depth + 1:
                counts[-1] += 1
                if counts[-1] > cap:
                    raise TooLarge(f"{what} holds more than {cap} entries in one list; "
                                   f"the limit is {cap}", limit=cap)
                counts.append(0)
        else:
            if cap >= 0 and depth <= items_depth + 1 and len(counts) > 1:
                counts.pop()
            depth -= 1


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def parse_json_text(text: str, limits: Limits, what: str, warnings: list[str] | None = None,
                    max_items: int | None = None) -> Any:
    """Parse JSON text after the depth check (and, with `max_items`, the count of arrays and
    objects each container near the top holds); lone surrogate escapes become U+FFFD."""
    check_depth(text, limits.max_json_depth, what, max_items)
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ImportInvalid(
            f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except ValueError as exc:
        raise ImportInvalid(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ImportInvalid(f"{what} nests JSON too deeply") from None
    if _SURROGATE_ESCAPE.search(text):
        fixed = _replace_surrogates(value)
        if fixed != value and warnings is not None:
            warnings.append(f"{what}: lone UTF-16 surrogate escapes were replaced by U+FFFD")
        value = fixed
    return value


def load_json_bytes(
    data: bytes, limits: Limits, what: str, max_bytes: int | None = None,
    warnings: list[str] | None = None, max_items: int | None = None,
) -> Any:
    """Size-check, UTF-8 decode and parse one JSON document."""
    cap = limits.max_text_bytes if max_bytes is None else max_bytes
    if len(data) > cap:
        raise TooLarge(f"{what} is {len(data)} bytes; the limit is {cap}", limit=cap)
    return parse_json_text(decode_utf8(data, what), limits, what, warnings, max_items)


def dump_compact(value: Any) -> str:
    """JSON like JavaScript's JSON.stringify: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dump_pretty(value: Any) -> bytes:
    """JSON with a 4-space indent (SillyTavern's export style), UTF-8."""
    return json.dumps(value, ensure_ascii=False, indent=4).encode("utf-8")
