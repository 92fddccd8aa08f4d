"""JSON values evacore can store, serialise with orjson and send upstream: null, booleans,
strings, integers within 64 bits, finite numbers, lists and objects with string keys, nested
at most `MAX_DEPTH` levels.

Must not: know what a value means (the typed models of settings and params do), or change
a value: it only says what is wrong with one.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

MAX_DEPTH = 32
"""Nesting levels a stored or forwarded value may have (orjson refuses past 254)."""
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""Integers outside a signed 64-bit range cannot be serialised by orjson."""


def json_problem(value: Any, where: str = "value") -> str | None:
    """What keeps `value` from being a JSON value evacore can carry, or None.

    The message names the path of the first bad part (`params.extra_body.n`)."""
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        if item is None or isinstance(item, (bool, str)):
            continue
        if isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                return f"{path}: integers must fit in 64 bits (from {INT_MIN} to {INT_MAX})"
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{path}: numbers must be finite"
            continue
        if isinstance(item, (list, dict)):
            if depth > MAX_DEPTH:
                return f"{path}: nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, list):
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
                continue
            for key, v in item.items():
                if not isinstance(key, str):
                    return f"{path}: object keys must be strings"
                stack.append((v, f"{path}.{key}", depth + 1))
            continue
        return f"{path}: {type(item).__name__} is not a JSON value"
    return None


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    problem = json_problem(value, "")
    if problem is not None:
        raise PydanticCustomError("invalid_value", "{reason}",
                                  {"reason": problem.removeprefix(".")})
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]
"""A request field holding any JSON object that evacore keeps or forwards as it is."""
