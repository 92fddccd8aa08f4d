"""Compile and run SillyTavern-style `/pattern/flags` find/replace, safely.

RE2 (linear time) runs every pattern it can compile; the rest (lookaround, backreferences)
runs on the `regex` module with a per-call timeout, so catastrophic backtracking cannot hang
a tour. Must not: know about placements, depths or prompts (regex_scripts.py does).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import re2
import regex

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_ST_FLAG_CHECK = re.compile(r"^(?!.*?(.).*?\1)[gmixXsuUAJ]+$")
_GROUP_REF = re.compile(r"\$(\d+)")
_MATCH_MACRO = re.compile(r"\{\{match\}\}", re.IGNORECASE)
_MACRO_TOKEN = re.compile(r"\{\{[^{}]*\}\}")
_REGEX_SPECIALS = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"}


class RegexTimeout(Exception):
    """A pattern ran past its time limit on this text (the text is left unchanged)."""


@dataclass(frozen=True, slots=True)
class Compiled:
    engine: str
    """"re2" or "regex" (the fallback, with a timeout)."""
    pattern: Any
    all_matches: bool
    """JS flag `g`: replace every match, else only the first."""


def split_find(find: str) -> tuple[str, str]:
    """`/pattern/flags` → (pattern, flags), the way SillyTavern's regexFromString reads it.

    Without a leading slash (or a closing one) the whole string is the pattern, with no
    flags, so only the first match is replaced. Repeated or unknown flag letters make the
    whole input the pattern.
    """
    if find.startswith("/"):
        j = find.rfind("/")
        if j > 0:
            m = re.match(r"[A-Za-z]*", find[j + 1:])
            flags = m.group(0) if m else ""
            if flags and not _ST_FLAG_CHECK.match(flags):
                return find, ""
            return find[1:j], flags
    return find, ""


def compile_find(pattern: str, flags: str) -> Compiled:
    """Compile JS-flavoured `pattern` with JS `flags` (g, i, m, s, u; d and v are accepted).

    Raises ValueError for a pattern neither engine accepts or an unsupported flag (y, x, …).
    """
    bad = sorted(set(flags) - set("gimsudv"))
    if bad:
        raise ValueError(f"unsupported regex flag(s) {''.join(bad)!r}")
    inline = "".join(f for f in "ims" if f in flags)
    try:
        compiled = re2.compile(f"(?{inline}){pattern}" if inline else pattern, options=_RE2_OPTIONS)
        return Compiled("re2", compiled, "g" in flags)
    except Exception:  # noqa: BLE001, S110 - not RE2 syntax: try the backtracking engine
        pass
    rflags = regex.V0
    rflags |= regex.IGNORECASE if "i" in flags else 0
    rflags |= regex.MULTILINE if "m" in flags else 0
    rflags |= regex.DOTALL if "s" in flags else 0
    try:
        return Compiled("regex", regex.compile(pattern, rflags), "g" in flags)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"invalid regex /{pattern}/{flags}: {exc}") from None


class PatternCache:
    """Compiled patterns by (pattern, flags); bounded, with no lock (one event loop)."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], Compiled | ValueError] = OrderedDict()

    def get(self, pattern: str, flags: str) -> Compiled:
        key = (pattern, flags)
        hit = self._items.get(key)
        if hit is None:
            try:
                hit = compile_find(pattern, flags)
            except ValueError as exc:
                hit = exc
            self._items[key] = hit
            if len(self._items) > self._size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        if isinstance(hit, ValueError):
            raise hit
        return hit


def escape_macro_value(value: str) -> str:
    """Escape a macro's value for use inside a pattern (SillyTavern's "escaped" substitution)."""
    out = []
    for ch in value:
        if ch in _REGEX_SPECIALS:
            out.append(_REGEX_SPECIALS[ch])
        elif ch in ".^$*+?{}[]\\/|()":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def substitute_find(pattern: str, mode: int, expand: Callable[[str], str]) -> str:
    """Resolve `{{macros}}` in a find pattern: 0 none, 1 raw, 2 escaped."""
    if mode == 0 or "{{" not in pattern:
        return pattern
    if mode == 1:
        return _MACRO_TOKEN.sub(lambda m: expand(m.group(0)), pattern)
    return _MACRO_TOKEN.sub(lambda m: escape_macro_value(expand(m.group(0))), pattern)


def replace(compiled: Compiled, text: str, replacement: str, trim_strings: Iterable[str],
            expand: Callable[[str], str], timeout: float) -> str:
    """Replace like SillyTavern's runRegexScript.

    In `replacement`, `{{match}}` and `$0` are the whole match, `$1`… the groups (a missing
    group is empty); each inserted match or group has every trim string removed; then macros
    in the result are resolved. `$&` and `$<name>` are not special (as in SillyTavern).
    """
    template = _MATCH_MACRO.sub("$0", replacement)
    trims = [expand(t) for t in trim_strings if t]
    has_refs = "$" in template

    def one(m: Any) -> str:
        if not has_refs:
            return expand(template)
        count = compiled.pattern.groups

        def group(ref: re.Match[str]) -> str:
            n = int(ref.group(1))
            value = m.group(n) if n <= count else None
            if not value:
                return ""
            for t in trims:
                value = value.replace(t, "")
            return value

        return expand(_GROUP_REF.sub(group, template))

    count = 0 if compiled.all_matches else 1
    if compiled.engine == "re2":
        return compiled.pattern.sub(one, text, count=count)
    try:
        return compiled.pattern.sub(one, text, count=count, timeout=timeout)
    except TimeoutError:
        raise RegexTimeout(f"pattern ran past {timeout:g}s") from None
