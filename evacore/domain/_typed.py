"""Checking a stored-as-JSON object against a pydantic model, in two ways: at the door every
problem is an error; on the read side each bad key is dropped and described.

Must not: convert values: what passes is kept exactly as it was given (unknown keys
included), so a round trip through the API changes nothing.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from evacore.domain.json_values import json_problem

_INSTANCE = re.compile(r" or instance of \w+")
ABSENT: Any = None
"""Default of a typed key that may be left out but never be `null` (the type has no None):
pydantic does not validate defaults, so an absent key passes and a given null does not."""


def invalid(reason: str) -> PydanticCustomError:
    """A validation error whose message is `reason` as written (no "Value error, " prefix)."""
    return PydanticCustomError("invalid_value", "{reason}", {"reason": reason})


def message(err: Any) -> str:
    """A pydantic error's message in the API's words (no "Value error, " prefix, no names
    of the Python classes behind a field)."""
    text = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return _INSTANCE.sub("", text)


def describe(exc: ValidationError, *, where: str = "", limit: int = 5) -> str:
    """`where.key.sub: message; …` for the first errors of a validation."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in (where, *err.get("loc", ())) if x != "")
        parts.append(f"{loc}: {message(err)}" if loc else message(err))
    return "; ".join(parts) or f"{where or 'value'}: invalid"


def check_object(model: type[BaseModel], value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object that `model` accepts; otherwise a validation error
    whose message names the bad keys (the field's own location goes in front of it)."""
    if not isinstance(value, dict):
        raise invalid("must be an object")
    problem = json_problem(value, "")
    if problem is not None:
        raise invalid(problem.removeprefix("."))
    try:
        model.model_validate(value)
    except ValidationError as exc:
        raise invalid(describe(exc)) from None
    return value


def read_object(model: type[BaseModel], value: Any, where: str
                ) -> tuple[dict[str, Any], list[str]]:
    """The keys of a stored `value` that `model` accepts, and what was dropped and why.

    A bad key is removed at the innermost object that holds it (`authors_note.depth`,
    not the whole note); a bad list item removes the whole list."""
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        return {}, [f"{where} is not an object; ignored"]
    if not value and _takes_nothing(model):
        return {}, []
    data: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        problem = json_problem(item, f"{where}.{key}")
        if problem is None:
            data[key] = item
        else:
            problems.append(f"{problem}; ignored")
    try:
        model.model_validate(data)
        return data, problems
    except ValidationError:
        data = copy.deepcopy(data)  # bad keys are removed from a copy, never from the row
    for _ in range(len(data) + 8):
        try:
            model.model_validate(data)
            return data, problems
        except ValidationError as exc:
            errors = exc.errors()
        removed: list[tuple[str, ...]] = []
        for err in errors:
            loc = tuple(str(x) for x in err.get("loc", ()))
            if any(loc[:len(done)] == done for done in removed):
                continue  # another error of a key already left out
            path = _drop(data, loc)
            if path is None:
                return {}, [*problems, f"{where}: {message(err)}; ignored"]
            removed.append(path)
            problems.append(f"{'.'.join((where, *path))}: {message(err)}; ignored")
    return {}, [*problems, f"{where}: could not be read; ignored"]


def _drop(data: dict[str, Any], loc: tuple[Any, ...]) -> tuple[str, ...] | None:
    """Remove the innermost object key on `loc`; return its path (None: nothing to remove)."""
    holder: Any = data
    last: tuple[dict[str, Any], str, tuple[str, ...]] | None = None
    path: tuple[str, ...] = ()
    for step in loc:
        if not (isinstance(holder, dict) and isinstance(step, str) and step in holder):
            break  # a list, a scalar, or a union member's name: remove what holds it
        path = (*path, step)
        last = (holder, step, path)
        holder = holder[step]
    if last is None:
        return None
    container, key, where = last
    container.pop(key, None)
    return where


def object_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its sub-models inlined (OpenAPI documents the keys)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            out = {k: inline(v) for k, v in node.items()}
            for prop in (out.get("properties") or {}).values():
                if isinstance(prop, dict) and prop.get("default", 0) is None:
                    del prop["default"]  # ABSENT: left out means the backend's default
            return out
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    out: dict[str, Any] = inline(schema)
    out.pop("title", None)
    return out


_TAKES_NOTHING: dict[type[BaseModel], bool] = {}
"""model -> whether it accepts an empty object (asked once: most stored objects are empty)."""


def _takes_nothing(model: type[BaseModel]) -> bool:
    known = _TAKES_NOTHING.get(model)
    if known is None:
        try:
            model.model_validate({})
            known = True
        except ValidationError:
            known = False
        _TAKES_NOTHING[model] = known
    return known
