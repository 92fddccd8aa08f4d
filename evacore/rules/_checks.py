"""Field checks shared by rule validation (R6.4) and rule loading (R6.4, bad stored data).

Must not: raise for a bad value — every check returns a problem string (or None), so the
validator can turn it into a 422 and the loader into a logged skip.
"""

from __future__ import annotations

import re
from typing import Any

import re2

ENV_FLAGS: tuple[str, ...] = ("telegram", "client_ops", "master", "trusted", "picture")
"""The environment conditions a rule's `when` may name, in their canonical order."""

TEXT_MAX_CHARS = 400
NAME_MAX_CHARS = 64
CONDITION_MAX_CHARS = 4000
REPEAT_MAX_TURNS = 1_000_000

_NAME_RE = re.compile(r"[a-z0-9_]+")
_TOOL_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_AFTER_RE = re.compile(r"after:([1-9][0-9]*)")

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to the caller, not to stderr


def compile_condition(condition: str) -> Any:
    """The RE2 program for a non-empty condition; raises `re2.error` if it does not compile."""
    return re2.compile(condition, options=_OPTIONS)


def name_problem(name: str) -> str | None:
    if not name:
        return "name: must not be empty"
    if len(name) > NAME_MAX_CHARS:
        return f"name: at most {NAME_MAX_CHARS} characters"
    if not _NAME_RE.fullmatch(name):
        return f"name: {name!r} may hold only a-z, 0-9 and _"
    return None


def scope_problem(scope: str) -> str | None:
    if scope == "text":
        return None
    if scope.startswith("tool:") and _TOOL_RE.fullmatch(scope[5:]):
        return None
    return (
        f"scope: {scope!r} is not 'text' or 'tool:<tool name>' "
        "(a tool name is 1-64 of A-Z, a-z, 0-9, _ and -)"
    )


def mode_for_scope(scope: str) -> str:
    """The only mode that fits a scope: tool calls get a reminder, answers an interrupt."""
    return "interrupt" if scope == "text" else "remind"


def mode_problem(mode: str | None, scope: str) -> str | None:
    if mode is None:
        return None
    if mode not in ("remind", "interrupt"):
        return f"mode: {mode!r} is not 'remind' or 'interrupt'"
    if mode != mode_for_scope(scope):
        if mode == "remind":
            why = "a spoken answer has nowhere to append a reminder"
        else:
            why = "an executed call cannot be taken back"
        return f"mode: {mode!r} does not fit scope {scope!r} ({why}); leave mode out"
    return None


def when_problem(when: list[str]) -> str | None:
    unknown = [flag for flag in when if flag not in ENV_FLAGS]
    if unknown:
        return f"when: unknown {', '.join(map(repr, unknown))}; allowed: {', '.join(ENV_FLAGS)}"
    return None


def canonical_when(when: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Known flags without duplicates, in the canonical order of ENV_FLAGS."""
    return tuple(flag for flag in ENV_FLAGS if flag in when)


def parse_repeat(repeat: str | None) -> tuple[str, int] | None:
    """("every", 0), ("once", 0) or ("after", N); None when malformed."""
    if repeat is None or repeat == "":
        return ("every", 0)
    if not isinstance(repeat, str):
        return None
    if repeat == "once":
        return ("once", 0)
    found = _AFTER_RE.fullmatch(repeat)
    if found and int(found.group(1)) <= REPEAT_MAX_TURNS:
        return ("after", int(found.group(1)))
    return None


def repeat_problem(repeat: str | None) -> str | None:
    if parse_repeat(repeat) is None:
        return (
            f"repeat: {repeat!r} is not empty, 'once' or 'after:N' "
            f"(N a whole number of chat turns, 1 to {REPEAT_MAX_TURNS})"
        )
    return None


def text_problem(text: str) -> str | None:
    if not text.strip():
        return "text: must not be empty"
    if len(text) > TEXT_MAX_CHARS:
        return f"text: {len(text)} characters, at most {TEXT_MAX_CHARS}"
    return None


def condition_problem(condition: str, negate: bool) -> str | None:
    if len(condition) > CONDITION_MAX_CHARS:
        return f"condition: at most {CONDITION_MAX_CHARS} characters"
    if condition == "":
        if negate:
            return "negate: an empty condition matches every target, so a negated one never fires"
        return None
    try:
        compile_condition(condition)
    except re2.error as exc:
        return (
            f"condition: the regex does not compile under RE2: {_re2_reason(exc)}{_hint(condition)}"
        )
    except (TypeError, ValueError, UnicodeError) as exc:  # e.g. a lone surrogate
        return f"condition: the regex does not compile under RE2: {exc}"
    return None


def _re2_reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else str(exc)
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    return str(reason)


def _hint(condition: str) -> str:
    if any(token in condition for token in ("(?=", "(?!", "(?<=", "(?<!")):
        return " (RE2 has no lookaround; to fire when something is missing, set negate)"
    if re.search(r"\\[1-9]", condition):
        return " (RE2 has no backreferences)"
    if "\\Z" in condition:
        return " (RE2 spells the end of text \\z, or $ without the m flag)"
    return ""
