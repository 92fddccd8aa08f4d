"""What a tool rule's regex reads: the call's arguments as compact JSON (R6.3).

Must not: reorder keys, escape non-ASCII or rewrite numbers; it only drops the whitespace the
model put between tokens, so a rule written against `{"path":"a.txt"}` always sees that form.
"""

from __future__ import annotations

import json
from typing import Any

_COMPACT_STRING = json.JSONEncoder(ensure_ascii=False).encode


class _Number(str):
    """A JSON number kept as the model wrote it (no float rounding, no int-size limits)."""


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def canonical_arguments(arguments: str) -> str:
    """`arguments` re-serialized as compact JSON: separators `,` and `:`, non-ASCII as is,
    keys in the model's order, numbers as written; the raw string if it is not valid JSON.
    (Already-parsed arguments, a dict or list, are serialized the same way.)"""
    if isinstance(arguments, (dict, list)):
        try:
            return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return str(arguments)
    try:
        value = json.loads(
            arguments,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_refuse_constant,
        )
        compact = _dump(value)
        compact.encode("utf-8")  # a lone surrogate escape (\ud800) is not valid JSON text
    except (ValueError, TypeError, RecursionError, UnicodeError):
        return arguments
    return compact


def _dump(value: Any) -> str:
    if isinstance(value, _Number):
        return str.__str__(value)
    if isinstance(value, str):
        return _COMPACT_STRING(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_COMPACT_STRING(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(item) for item in value) + "]"
    raise TypeError(f"unexpected JSON value {type(value).__name__}")
