"""The model's stream-rule tools (R6.9): `stream_rule_list`, `stream_rule_create`,
`stream_rule_edit`, `stream_rule_delete`, offered in master tours only.

Must not: validate rules itself or bypass the shared operations: the same validation as the
HTTP API and the CLI applies, and a rejected input is an `error: …` result saying what to fix.
"""

from __future__ import annotations

import json
from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.errors import EvacoreError, ToolError

_ENV = ["telegram", "client_ops", "master", "trusted", "picture"]
_FIELDS: dict[str, Any] = {
    "name": {"type": "string", "description": "Unique rule name, [a-z0-9_]+."},
    "scope": {"type": "string", "description": "'text' (your finished answer) or "
              "'tool:<tool name>' (a call of that tool)."},
    "condition": {"type": "string", "description": "RE2 regex over the answer text or the "
                  "call's arguments as compact JSON; empty matches everything."},
    "negate": {"type": "boolean", "description": "Fire when the condition is NOT found."},
    "when": {"type": "array", "items": {"type": "string", "enum": _ENV},
             "description": "Environment flags that must all hold; empty = every tour."},
    "text": {"type": "string", "description": "What you will be told when it fires "
             "(1-400 characters)."},
    "repeat": {"type": ["string", "null"], "description": "null (every tour), 'once' (once "
               "per chat) or 'after:N' (at most once every N chat turns)."},
    "enabled": {"type": "boolean", "description": "A disabled rule is kept but not used."},
}
_PUBLIC = ("name", "scope", "condition", "negate", "when", "text", "mode", "repeat", "enabled",
           "seeded")


def _core(ctx: ToolContext) -> Any:
    return ctx.service("core")


def _shown(rule: Any) -> dict[str, Any]:
    from evacore.rules import rule_to_json

    data = rule_to_json(rule)
    return {key: data[key] for key in _PUBLIC}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _run(ctx: ToolContext, action: Any) -> Any:
    """Run `action(session)` in one transaction; rule errors become the tool's error text."""
    try:
        async with _core(ctx).session() as session:
            return await action(session)
    except EvacoreError as exc:
        if isinstance(exc, ToolError):
            raise
        raise ToolError(exc.message) from None


async def stream_rule_list(args: dict[str, Any], ctx: ToolContext) -> str:
    from evacore.services import rules as service

    rules = await _run(ctx, service.list_rules)
    return _dump([_shown(r) for r in rules])


async def stream_rule_create(args: dict[str, Any], ctx: ToolContext) -> str:
    from evacore.services import rules as service

    rule = await _run(ctx, lambda s: service.create_rule(s, args))
    return "created " + _dump(_shown(rule))


async def stream_rule_edit(args: dict[str, Any], ctx: ToolContext) -> str:
    from evacore.services import rules as service

    name = args["name"]
    patch = {key: value for key, value in args.items() if key != "name"}
    if not patch:
        raise ToolError("give at least one field to change besides name")
    rule = await _run(ctx, lambda s: service.edit_rule(s, name, patch))
    return "saved " + _dump(_shown(rule))


async def stream_rule_delete(args: dict[str, Any], ctx: ToolContext) -> str:
    from evacore.services import rules as service

    name = args["name"]
    await _run(ctx, lambda s: service.delete_rule(s, name))
    return f"deleted {name}"


def rule_tools() -> list[Tool]:
    """The four rule tools: master only, kind `rules` (never offered to guests)."""
    master = frozenset({"master"})
    optional = {key: value for key, value in _FIELDS.items() if key != "name"}
    return [
        Tool(
            name="stream_rule_list",
            description="List the stream rules: each one's name, scope, condition, text and "
            "policy. Rules remind you at the spot where you tend to slip.",
            parameters={"type": "object", "properties": {}},
            handler=stream_rule_list, roles=master, kind="rules", concurrency_safe=True,
        ),
        Tool(
            name="stream_rule_create",
            description="Create a stream rule. A 'tool:<name>' rule puts its text on top of that "
            "tool's result when the call matches; a 'text' rule sends back a matching answer to "
            "be written again. Use it for things you know but forget, not for missing knowledge.",
            parameters={"type": "object", "properties": dict(_FIELDS),
                        "required": ["name", "scope", "text"], "additionalProperties": False},
            handler=stream_rule_create, roles=master, kind="rules",
        ),
        Tool(
            name="stream_rule_edit",
            description="Change fields of a stream rule, named by name; other fields stay.",
            parameters={"type": "object", "properties": {"name": _FIELDS["name"], **optional},
                        "required": ["name"], "additionalProperties": False},
            handler=stream_rule_edit, roles=master, kind="rules",
        ),
        Tool(
            name="stream_rule_delete",
            description="Delete a stream rule by name (its firing records are kept).",
            parameters={"type": "object", "properties": {"name": _FIELDS["name"]},
                        "required": ["name"], "additionalProperties": False},
            handler=stream_rule_delete, roles=master, kind="rules",
        ),
    ]
