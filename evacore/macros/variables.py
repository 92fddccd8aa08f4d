"""Local and global variable macros (getvar/setvar/addvar/incvar/decvar and friends).

Must not: persist anything; it mutates `env.local_vars`/`env.global_vars`, the caller saves.
Numbers follow JavaScript `Number()` rules, so cards written for SillyTavern behave the same.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evacore.macros.env import MacroEnv

if TYPE_CHECKING:
    from evacore.macros.engine import MacroEngine

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_RADIX = re.compile(r"0([xXoObB])([0-9a-fA-F]+)")


def js_number(value: Any) -> float | None:
    """JavaScript `Number(value)`, or None where JavaScript gives NaN."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    text = str(value).strip()
    if text == "":
        return 0.0
    if _DECIMAL.fullmatch(text):
        return float(text)
    radix = _RADIX.fullmatch(text)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1).lower()]
        try:
            return float(int(radix.group(2), base))
        except ValueError:
            return None
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    return None


def js_string(value: Any) -> str:
    """JavaScript `String(value)` for the values variables hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _number_value(number: float) -> int | float:
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def get_var(store: dict[str, Any], name: str) -> str:
    """`''` when unset; numeric strings come back as (normalised) numbers."""
    value = store.get(name)
    if value is None or value == "":
        return ""
    number = js_number(value)
    if number is None:
        return js_string(value)
    return js_string(number)


def set_var(store: dict[str, Any], name: str, value: str) -> str:
    store[name] = value
    return ""


def add_var(store: dict[str, Any], name: str, value: str) -> Any:
    """Add numerically when both sides are numbers, push onto a JSON array, else concatenate.

    Returns the new value (incvar/decvar print it; addvar prints nothing).
    """
    current = store.get(name)
    if current is None or current == "":
        current = 0
    if isinstance(current, str):
        try:
            parsed = json.loads(current)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            parsed.append(value)
            store[name] = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
            return store[name]
    increment = js_number(value)
    base = js_number(current)
    if increment is None or base is None:
        prefix = js_string(current) if base is None else ("" if base == 0 else js_string(base))
        text = prefix + value
        store[name] = text
        return text
    total = base + increment
    if math.isnan(total):
        return ""
    store[name] = _number_value(total)
    return store[name]


def _store(env: MacroEnv, scope: str) -> dict[str, Any]:
    return env.global_vars if scope == "global" else env.local_vars


def _bind(scope: str) -> dict[str, tuple[Callable[..., str], int, int, str]]:
    def getvar(env: MacroEnv, name: str) -> str:
        return get_var(_store(env, scope), name.strip())

    def setvar(env: MacroEnv, name: str, *value: str) -> str:
        # a value may itself contain `::`; the parts are joined back
        return set_var(_store(env, scope), name.strip(), "::".join(value))

    def addvar(env: MacroEnv, name: str, *value: str) -> str:
        add_var(_store(env, scope), name.strip(), "::".join(value))
        return ""

    def incvar(env: MacroEnv, name: str) -> str:
        return js_string(add_var(_store(env, scope), name.strip(), "1"))

    def decvar(env: MacroEnv, name: str) -> str:
        return js_string(add_var(_store(env, scope), name.strip(), "-1"))

    def hasvar(env: MacroEnv, name: str) -> str:
        return "true" if name.strip() in _store(env, scope) else "false"

    def deletevar(env: MacroEnv, name: str) -> str:
        _store(env, scope).pop(name.strip(), None)
        return ""

    where = "global" if scope == "global" else "chat"
    return {
        "getvar": (getvar, 1, 1, f"Value of the {where} variable (numbers normalised); '' if unset."),
        "setvar": (setvar, 1, -1, f"Set the {where} variable to the value; prints nothing."),
        "addvar": (addvar, 2, -1, f"Add a number, push to a JSON array or append text to the {where} variable; prints nothing."),
        "incvar": (incvar, 1, 1, f"Add 1 to the {where} variable and print the new value."),
        "decvar": (decvar, 1, 1, f"Subtract 1 from the {where} variable and print the new value."),
        "hasvar": (hasvar, 1, 1, f"'true' if the {where} variable exists, else 'false'."),
        "deletevar": (deletevar, 1, 1, f"Remove the {where} variable; prints nothing."),
    }


_ALIASES = {
    ("local", "hasvar"): ("varexists",),
    ("local", "deletevar"): ("flushvar",),
    ("global", "hasvar"): ("globalvarexists",),
    ("global", "deletevar"): ("flushglobalvar",),
}


def register_variables(engine: MacroEngine) -> None:
    for scope, infix in (("local", ""), ("global", "global")):
        for base, (fn, lo, hi, description) in _bind(scope).items():
            name = base[:-3] + infix + "var" if infix else base
            aliases = _ALIASES.get((scope, base), ())
            engine.register(
                name, fn, description=description, min_args=lo,
                max_args=None if hi < 0 else hi, aliases=aliases,
            )
