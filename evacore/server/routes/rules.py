"""`/v1/rules` (R6.9, R12.5), master only: list, create, edit, delete stream rules, and
`POST /v1/rules/test` ("would this rule fire on this sample?").

Must not: validate rules itself; bodies are taken raw and checked by the rules package, so every
surface gives the same `rule_invalid` error (422) and a rejected input changes nothing.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from evacore.errors import RuleInvalid
from evacore.rules import RuleInput, RulePatch, rule_to_json
from evacore.server.auth import Master
from evacore.server.deps import SessionDep
from evacore.services import rules as service

router = APIRouter(tags=["rules"])


def _body_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


_PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "description": "A stored rule to try."},
        "rule": {**RuleInput.model_json_schema(), "description": "An unsaved rule to try."},
        "text": {"type": "string", "description": "A sample answer (text rules)."},
        "tool": {"type": "string", "description": "The called tool (tool rules)."},
        "arguments": {"description": "The call's arguments: a JSON string or an object."},
        "env": {"description": "Flags that hold, as a list or an object of booleans; "
                "omitted: `when` is assumed to hold."},
    },
}
_PROBE_KEYS = frozenset(_PROBE_SCHEMA["properties"])


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise RuleInvalid("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise RuleInvalid(f"the body must be a JSON object, not {type(data).__name__}")
    return data


@router.get("/rules")
async def list_rules(_: Master, session: SessionDep) -> dict[str, list[dict[str, Any]]]:
    """Every stored rule, in name order."""
    return {"rules": [rule_to_json(r) for r in await service.list_rules(session)]}


@router.post("/rules", status_code=201,
             openapi_extra=_body_schema(RuleInput.model_json_schema()))
async def create_rule(request: Request, _: Master, session: SessionDep) -> dict[str, Any]:
    """Create a rule (fields of R6.2). 422 `rule_invalid` if invalid, 409 if the name is taken."""
    rule = await service.create_rule(session, await _json_object(request))
    return rule_to_json(rule)


@router.get("/rules/{name}")
async def get_rule(name: str, _: Master, session: SessionDep) -> dict[str, Any]:
    from evacore.store import rules as store

    return rule_to_json(await store.get_rule(session, name))


@router.patch("/rules/{name}", openapi_extra=_body_schema(RulePatch.model_json_schema()))
async def edit_rule(name: str, request: Request, _: Master, session: SessionDep) -> dict[str, Any]:
    """Change any subset of a rule's fields; the result is validated as a whole."""
    rule = await service.edit_rule(session, name, await _json_object(request))
    return rule_to_json(rule)


@router.delete("/rules/{name}", status_code=204)
async def delete_rule(name: str, _: Master, session: SessionDep) -> Response:
    """Delete a rule; its firing records stay in the stats."""
    await service.delete_rule(session, name)
    return Response(status_code=204)


@router.post("/rules/test", openapi_extra=_body_schema(_PROBE_SCHEMA))
async def test_rule(request: Request, _: Master, session: SessionDep) -> dict[str, Any]:
    """Whether a stored (`name`) or unsaved (`rule`) rule would fire on a sample answer `text`,
    or on a call of `tool` with `arguments`, in `env`. Fires nothing."""
    body = await _json_object(request)
    unknown = sorted(set(body) - _PROBE_KEYS)
    if unknown:
        raise RuleInvalid(f"unknown fields {unknown}; fields: {', '.join(sorted(_PROBE_KEYS))}")
    text, tool, env = body.get("text"), body.get("tool"), body.get("env")
    if text is not None and not isinstance(text, str):
        raise RuleInvalid("text: must be a string")
    if tool is not None and not isinstance(tool, str):
        raise RuleInvalid("tool: must be a string")
    if "name" in body and not isinstance(body["name"], str):
        raise RuleInvalid("name: must be a string")
    arguments = body.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments).decode()
    rule, result = await service.probe(
        session, name=body.get("name"), rule=body.get("rule"), text=text, tool=tool,
        arguments=arguments, env=_env(env),
    )
    return {"rule": rule.name, "fires": result.fires, "reason": result.reason,
            "target": result.target}


def _env(env: Any) -> dict[str, bool] | list[str] | None:
    if env is None:
        return None
    if isinstance(env, list) and all(isinstance(flag, str) for flag in env):
        return env
    if isinstance(env, dict) and all(isinstance(v, bool) for v in env.values()):
        return env
    raise RuleInvalid("env: a list of flag names or an object of booleans")
