"""Stream rules as data: the `Rule` record, input validation (R6.4) and the public JSON shape.

Must not: touch the database or the engine; it checks and shapes rule data, nothing more.
The same validation serves the HTTP API, the CLI and the model's rule tools (R6.9).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from evacore.errors import Conflict, RuleInvalid
from evacore.rules import _checks
from evacore.rules._checks import ENV_FLAGS, canonical_when, mode_for_scope

READ_ONLY_FIELDS: frozenset[str] = frozenset(
    {"created_at", "updated_at", "seeded", "seed_version", "seed_hash"}
)
"""Fields of the JSON shape that input may carry back (e.g. an edited GET) and that are ignored."""

HASHED_FIELDS: tuple[str, ...] = (
    "name",
    "scope",
    "condition",
    "negate",
    "when",
    "text",
    "mode",
    "repeat",
)
"""The fields whose canonical JSON `content_hash` digests (a seed's text hash, R6.10)."""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One stream rule (R6.2). Building one does not validate it: stored rows may be bad data,
    which `RuleSet.compile` skips; input goes through `validate_rule` / `apply_patch`."""

    name: str
    scope: str
    """`text` or `tool:<tool name>`."""
    condition: str = ""
    """RE2 regex over the target; "" matches every target of the scope."""
    negate: bool = False
    when: tuple[str, ...] = ()
    """Environment flags that must all hold: telegram, client_ops, master, trusted, picture."""
    text: str
    mode: str = ""
    """`remind` (tool scopes) or `interrupt` (`text`); derived from the scope when empty."""
    repeat: str | None = None
    """None (every tour), `once` (once per chat) or `after:N` (at most once every N chat turns)."""
    enabled: bool = True
    created_at: datetime | None = None
    updated_at: datetime | None = None
    seed_version: int | None = None
    seed_hash: str | None = None
    """sha256 of the seeded fields this rule was written from; None for the master's own rules."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "when", tuple(self.when or ()))
        if not self.mode:
            object.__setattr__(self, "mode", mode_for_scope(self.scope))
        if self.repeat == "":
            object.__setattr__(self, "repeat", None)

    @property
    def seeded(self) -> bool:
        return self.seed_hash is not None


class RuleInput(BaseModel):
    """The body of a create (POST /v1/rules, `stream_rule_create`, `evacore rules add`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(
        description="Unique, [a-z0-9_]+; sent to the model in the tag's rule attribute."
    )
    scope: str = Field(
        description="'text' (the finished answer) or 'tool:<tool name>' (a tool call)."
    )
    condition: str = Field("", description="RE2 regex over the target; empty matches every target.")
    negate: StrictBool = Field(False, description="Fire when the condition is NOT found.")
    when: list[str] = Field(
        default_factory=list,
        description=f"Environment flags that must all hold: {', '.join(ENV_FLAGS)}.",
    )
    text: str = Field(description="What the model is told, 1-400 characters.")
    mode: str | None = Field(
        None, description="'remind' for tool scopes, 'interrupt' for text; derived."
    )
    repeat: str | None = Field(
        None, description="null, 'once' (per chat) or 'after:N' (chat turns)."
    )
    enabled: StrictBool = Field(True, description="A disabled rule is kept but not loaded.")


class RulePatch(BaseModel):
    """The body of an edit (PATCH /v1/rules/{name}): any subset of the writable fields."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = None
    scope: str | None = None
    condition: str | None = None
    negate: StrictBool | None = None
    when: list[str] | None = None
    text: str | None = None
    mode: str | None = None
    repeat: str | None = None
    enabled: StrictBool | None = None


_NULLABLE_IN_PATCH = frozenset({"mode", "repeat"})


def validate_rule(
    data: Any, *, existing_names: set[str] | None = None, now: datetime | None = None
) -> Rule:
    """A new rule from input, or RuleInvalid (422) naming every problem; Conflict (409) for a
    name already in `existing_names` (None: the caller enforces uniqueness itself)."""
    fields = _typed(RuleInput, data)
    _raise_problems(fields)
    if existing_names is not None and fields["name"] in existing_names:
        raise Conflict(f"a rule named {fields['name']!r} already exists", name=fields["name"])
    stamp = now or datetime.now(UTC)
    return _build(fields, created_at=stamp, updated_at=stamp)


def apply_patch(rule: Rule, patch: Any, *, now: datetime | None = None) -> Rule:
    """The rule with `patch` applied and re-validated as a whole; RuleInvalid on any problem.

    A patch that changes nothing returns `rule` itself (its `updated_at` untouched). A rule
    cannot be renamed (its name keys repeats and telemetry); the mode follows the new scope.
    """
    given = _typed(RulePatch, patch)
    problems = [
        f"{key}: must not be null"
        for key, value in given.items()
        if value is None and key not in _NULLABLE_IN_PATCH
    ]
    if "name" in given and given["name"] is not None and given["name"] != rule.name:
        problems.append("name: a rule cannot be renamed; create a new one and delete this one")
    if problems:
        raise RuleInvalid(_message(problems), problems=problems)
    fields = {key: getattr(rule, key) for key in RuleInput.model_fields}
    fields["when"] = list(rule.when)
    fields["mode"] = None  # the mode always follows the (possibly new) scope
    fields.update(given)
    _raise_problems(fields)
    updated = _build(
        fields,
        created_at=rule.created_at,
        updated_at=rule.updated_at,
        seed_version=rule.seed_version,
        seed_hash=rule.seed_hash,
    )
    if updated == rule:
        return rule
    return dataclasses.replace(updated, updated_at=now or datetime.now(UTC))


def rule_to_json(rule: Rule) -> dict[str, Any]:
    """The public JSON shape of a rule (R6.2, R12.5, §13)."""
    return {
        "name": rule.name,
        "scope": rule.scope,
        "condition": rule.condition,
        "negate": rule.negate,
        "when": list(rule.when),
        "text": rule.text,
        "mode": rule.mode or mode_for_scope(rule.scope),
        "repeat": rule.repeat or None,
        "enabled": rule.enabled,
        "created_at": _iso(rule.created_at),
        "updated_at": _iso(rule.updated_at),
        "seeded": rule.seeded,
        "seed_version": rule.seed_version,
        "seed_hash": rule.seed_hash,
    }


def content_hash(rule: Rule) -> str:
    """sha256 (hex) of the canonical JSON of the rule's HASHED_FIELDS."""
    body = {key: getattr(rule, key) for key in HASHED_FIELDS}
    body["when"] = list(canonical_when(rule.when))
    body["repeat"] = rule.repeat or None
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def _typed(model: type[BaseModel], data: Any) -> dict[str, Any]:
    """Type-checked fields actually given (read-only fields dropped), or RuleInvalid."""
    if not isinstance(data, Mapping):
        raise RuleInvalid(f"a rule must be a JSON object, not {type(data).__name__}")
    given = {key: value for key, value in data.items() if key not in READ_ONLY_FIELDS}
    try:
        parsed = model.model_validate(given)
    except ValidationError as exc:
        problems = [_describe(error) for error in exc.errors()]
        raise RuleInvalid(_message(problems), problems=problems) from None
    return {key: getattr(parsed, key) for key in parsed.model_fields_set}


def _describe(error: Mapping[str, Any]) -> str:
    loc = ".".join(str(part) for part in error.get("loc", ())) or "rule"
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return f"unknown field {loc!r} (fields: {', '.join(RuleInput.model_fields)})"
    if kind == "missing":
        return f"{loc}: required"
    wanted = {
        "string_type": "must be a string",
        "bool_type": "must be true or false",
        "list_type": "must be a list of strings",
    }.get(kind)
    if wanted:
        return f"{loc}: {wanted}, got {type(error.get('input')).__name__}"
    return f"{loc}: {error.get('msg', 'invalid')}"


def _raise_problems(fields: Mapping[str, Any]) -> None:
    problems = _problems(fields)
    if problems:
        raise RuleInvalid(_message(problems), problems=problems)


def _problems(fields: Mapping[str, Any]) -> list[str]:
    scope = fields["scope"]
    found = [
        _checks.name_problem(fields["name"]),
        _checks.scope_problem(scope),
        _checks.text_problem(fields.get("text", "")),
        _checks.condition_problem(fields.get("condition", ""), fields.get("negate", False)),
        _checks.when_problem(list(fields.get("when", []))),
        _checks.repeat_problem(fields.get("repeat")),
    ]
    if _checks.scope_problem(scope) is None:
        found.append(_checks.mode_problem(fields.get("mode"), scope))
    for key in ("text", "condition"):
        value = fields.get(key, "")
        if "\x00" in value:
            found.append(f"{key}: must not contain NUL characters")
        elif not _encodable(value):
            found.append(f"{key}: is not valid Unicode (lone surrogate)")
    return [problem for problem in found if problem]


def _build(fields: Mapping[str, Any], **extra: Any) -> Rule:
    return Rule(
        name=fields["name"],
        scope=fields["scope"],
        condition=fields.get("condition", ""),
        negate=fields.get("negate", False),
        when=canonical_when(list(fields.get("when", []))),
        text=fields["text"],
        mode=mode_for_scope(fields["scope"]),
        repeat=fields.get("repeat") or None,
        enabled=fields.get("enabled", True),
        **extra,
    )


def _message(problems: list[str]) -> str:
    return "invalid rule: " + "; ".join(problems)


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _iso(stamp: datetime | None) -> str | None:
    if stamp is None:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.isoformat()
