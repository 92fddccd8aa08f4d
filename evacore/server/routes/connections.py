"""`/v1/connections` (R12.2): create, list, read, update, delete; API keys never returned.

Must not: log or echo an API key or a secret header or query value; responses carry a
masked form only (`store.connections.connection_json`). `params` are typed at the door
(domain/connection_params.py): known keys with the wrong type or range are a 422, other
keys pass through to the provider.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from evacore.domain.connection_params import ConnectionParamsField
from evacore.domain.json_values import JsonObject
from evacore.errors import InvalidInput
from evacore.providers.mock import parse_script
from evacore.render import InstructTemplate, render_chat_template
from evacore.server.auth import AnyUser, Master
from evacore.server.deps import SessionDep
from evacore.store import connections as repo
from evacore.store.tables import Connection

router = APIRouter(tags=["connections"])

Kind = Literal["openai-chat", "openai-text", "anthropic", "kobold", "mock"]
PostMode = Literal[
    "none", "merge", "semi", "strict", "single", "merge_tools", "semi_tools", "strict_tools"
]


class ConnectionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    kind: Kind
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: str | None = Field(default=None, max_length=4000)
    model: str | None = Field(default=None, max_length=300)
    context_size: int = Field(default=8192, ge=256, le=10_000_000)
    max_tokens: int = Field(default=512, ge=1, le=1_000_000)
    tokenizer: str | None = Field(default=None, max_length=300)
    vision: StrictBool = False
    prefill: str = Field(default="", max_length=100_000)
    postprocess: PostMode = "none"
    instruct: JsonObject | str | None = None
    params: ConnectionParamsField = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return v


class ConnectionPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, min_length=1, max_length=200)
    kind: Kind | None = None
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: str | None = Field(default=None, max_length=4000)
    model: str | None = Field(default=None, max_length=300)
    context_size: int | None = Field(default=None, ge=256, le=10_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    tokenizer: str | None = Field(default=None, max_length=300)
    vision: StrictBool | None = None
    prefill: str | None = Field(default=None, max_length=100_000)
    postprocess: PostMode | None = None
    instruct: JsonObject | str | None = None
    params: ConnectionParamsField | None = None
    """Replaces the connection's params as a whole."""

    _url = field_validator("base_url")(ConnectionIn._url.__func__)  # type: ignore[attr-defined]


def _check(kind: str, base_url: str | None, context_size: int, max_tokens: int,
           params: dict[str, Any] | None) -> None:
    if kind != "mock" and not base_url:
        raise InvalidInput(f"a {kind} connection needs a base_url")
    if max_tokens >= context_size:
        raise InvalidInput("max_tokens must be smaller than context_size")
    if params and "script" in params:
        parse_script(params["script"])  # the mock provider's rules: 422 names the bad one


def _instruct(value: Any) -> dict[str, Any] | None:
    """`instruct` as stored: `{"preset", "context", "sysprompt": name or id, "chat_template",
    "bos_token", "eos_token"}` or an inline
    SillyTavern instruct template (it must read as one: 422 names the field otherwise)."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"preset": value}
    if "input_sequence" in value:
        InstructTemplate.from_st(value)
    for key in ("preset", "context", "sysprompt"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise InvalidInput(f"instruct.{key} must be the name or id of a preset")
    for key in ("chat_template", "bos_token", "eos_token"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise InvalidInput(f"instruct.{key} must be a string")
    if value.get("chat_template"):
        # a template that cannot render one user message is refused here, not mid-tour
        render_chat_template(value["chat_template"], [{"role": "user", "content": "hi"}],
                             bos_token=value.get("bos_token") or "",
                             eos_token=value.get("eos_token") or "")
    return value


@router.post("/connections", status_code=201)
async def create_connection(body: ConnectionIn, _: Master, session: SessionDep) -> dict[str, Any]:
    _check(body.kind, body.base_url, body.context_size, body.max_tokens, body.params)
    if body.tokenizer:
        from evacore.server.routes._checks import check_tokenizer

        check_tokenizer(body.tokenizer)
    row = Connection(**{**body.model_dump(), "instruct": _instruct(body.instruct)})
    session.add(row)
    await session.flush()
    return repo.connection_json(row)


@router.get("/connections")
async def list_connections(_: AnyUser, session: SessionDep) -> dict[str, Any]:
    return {"connections": [repo.connection_json(c) for c in await repo.list_connections(session)]}


@router.get("/connections/{connection_id}")
async def get_connection(connection_id: str, _: AnyUser, session: SessionDep) -> dict[str, Any]:
    return repo.connection_json(await repo.get_connection(session, connection_id))


@router.patch("/connections/{connection_id}")
async def patch_connection(
    connection_id: str, body: ConnectionPatch, _: Master, session: SessionDep
) -> dict[str, Any]:
    row = await repo.get_connection(session, connection_id)
    changes = repo.keep_masked_secrets(row, body.model_dump(exclude_unset=True))
    if "instruct" in changes:
        changes["instruct"] = _instruct(changes["instruct"])
    if changes.get("tokenizer"):
        from evacore.server.routes._checks import check_tokenizer

        check_tokenizer(changes["tokenizer"])
    _check(
        changes.get("kind", row.kind),
        changes.get("base_url", row.base_url),
        changes.get("context_size") or row.context_size,
        changes.get("max_tokens") or row.max_tokens,
        changes.get("params"),
    )
    for key, value in changes.items():
        if key in ("name", "kind", "context_size", "max_tokens", "vision", "prefill",
                   "postprocess", "params") and value is None:
            continue
        setattr(row, key, value)
    await session.flush()
    return repo.connection_json(row)


@router.delete("/connections/{connection_id}", status_code=204)
async def delete_connection(connection_id: str, _: Master, session: SessionDep) -> Response:
    row = await repo.get_connection(session, connection_id)
    await session.delete(row)
    return Response(status_code=204)
