"""`/v1/memory` (master): memory blocks CRUD, data-bank documents, retrieval settings and a
search probe (R2.5, SPEC §13 "Memory over HTTP").

Must not: hold memory logic (evacore/memory/ does); it validates, checks scopes and maps.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from sqlalchemy import update

from evacore.errors import InvalidInput, NotFound, UnsupportedMedia
from evacore.formats.limits import Limits
from evacore.importing.upload import read_upload, upload_body
from evacore.memory import blocks as repo
from evacore.memory import index as docs
from evacore.memory.embeddings import public_config
from evacore.memory.index import chat_keys
from evacore.memory.options import merge_lenient
from evacore.memory.retrieve import Query as SearchQuery
from evacore.memory.retrieve import search
from evacore.memory.service import MemoryService
from evacore.server.auth import Master
from evacore.server.deps import CoreDep, SessionDep
from evacore.store.settings import get_setting
from evacore.store.tables import Character, Chat, User

router = APIRouter(tags=["memory"])

MAX_DOCUMENT_BYTES = 5 * 1024 * 1024
_DOCUMENT_LIMITS = Limits(max_input_bytes=MAX_DOCUMENT_BYTES)
_MARKDOWN = (".md", ".markdown", ".mdown")
_TEXT_SUFFIXES = (".txt", ".text", *_MARKDOWN)
_DOCUMENT_FIELDS = {
    "chat_id": {"type": "string", "description": "Only this chat searches the document."},
    "character_id": {"type": "string",
                     "description": "Every chat with this character searches the document."},
    "name": {"type": "string", "description": "Default: the file name."},
}
_POSITION = r"^(after_char|before_char|top|depth:\d{1,3})$"


class BlockIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chat_id: str | None = Field(None, max_length=32)
    character_id: str | None = Field(None, max_length=32)
    user_id: str | None = Field(None, max_length=32)
    label: str = Field(min_length=1, max_length=200)
    content: str = Field("", max_length=1_000_000)
    mandatory: StrictBool = False
    read_only: StrictBool = False
    limit: int = Field(2000, ge=1, le=1_000_000)
    position: str = Field("after_char", pattern=_POSITION)
    role: Literal["system", "user", "assistant"] = "system"


class BlockPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str | None = Field(None, min_length=1, max_length=200)
    content: str | None = Field(None, max_length=1_000_000)
    mandatory: StrictBool | None = None
    read_only: StrictBool | None = None
    limit: int | None = Field(None, ge=1, le=1_000_000)
    position: str | None = Field(None, pattern=_POSITION)
    role: Literal["system", "user", "assistant"] | None = None


class SettingsPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    retrieval: dict[str, Any] | None = None
    """Instance-wide retrieval options (partial; a null value restores a default)."""
    embeddings: dict[str, Any] | None = None
    """`{"kind": "minilm"}`, `{"kind": "openai", "base_url", "model", "api_key"}`, or null."""


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chat_id: str = Field(max_length=32)
    query: str = Field(min_length=1, max_length=10_000)
    top_k: int | None = Field(None, ge=1, le=50)


def _service(core: Any) -> MemoryService:
    return core.memory  # type: ignore[no-any-return]


async def _scope(session: Any, chat_id: str | None, character_id: str | None,
                 user_id: str | None, *, required: bool) -> tuple[str, str] | None:
    given = [(k, v) for k, v in (("chat", chat_id), ("character", character_id),
                                 ("user", user_id)) if v is not None]
    if len(given) > 1 or (required and not given):
        raise InvalidInput("give exactly one of chat_id, character_id, user_id")
    if not given:
        return None
    kind, value = given[0]
    model = {"chat": Chat, "character": Character, "user": User}[kind]
    if await session.get(model, value) is None:
        raise InvalidInput(f"{kind} {value} does not exist")
    return kind, value


# documents (registered before /memory/{block_id})
@router.post("/memory/documents", status_code=201,
             openapi_extra=upload_body(fields=_DOCUMENT_FIELDS))
async def upload_document(request: Request, _: Master, core: CoreDep) -> dict[str, Any]:
    """Add a UTF-8 text or Markdown `file` to the data bank: global, or for one chat
    (`chat_id`) or one character (`character_id`)."""
    upload = await read_upload(request, _DOCUMENT_LIMITS)
    fields = upload.fields
    filename = (upload.filename or "").strip()
    suffix = PurePath(filename).suffix.lower()
    if suffix and suffix not in _TEXT_SUFFIXES:
        raise UnsupportedMedia("documents must be text or Markdown (.txt, .md)")
    try:
        text = upload.content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnsupportedMedia("the document is not UTF-8 text") from None
    if "\x00" in text:
        raise UnsupportedMedia("the document holds binary data")
    if not text.strip():
        raise InvalidInput("the document is empty")
    name = (fields.get("name") or filename or "document").strip()[:300] or "document"
    service = _service(core)
    async with core.session() as session:
        scope = await _scope(session, fields.get("chat_id") or None,
                             fields.get("character_id") or None, None, required=False)
        opts = await service.options(session)
        kind, scope_id = scope if scope else ("global", "")
        row = await docs.add_document(
            session, name=name, content=text, scope_kind=kind, scope_id=scope_id,
            media_type="text/markdown" if suffix in _MARKDOWN else "text/plain",
            size=len(upload.content), sha256=hashlib.sha256(upload.content).hexdigest(),
            chunk_chars=opts.chunk_chars, overlap=opts.chunk_overlap,
        )
    service.forget_stats()
    return _document_json(row)


@router.get("/memory/documents")
async def list_documents(
    _: Master, session: SessionDep,
    chat_id: Annotated[str | None, Query(max_length=32)] = None,
    character_id: Annotated[str | None, Query(max_length=32)] = None,
) -> dict[str, Any]:
    if chat_id is not None and character_id is not None:
        raise InvalidInput("give at most one of chat_id, character_id")
    if chat_id is not None:
        rows = await docs.list_documents(session, "chat", chat_id)
    elif character_id is not None:
        rows = await docs.list_documents(session, "character", character_id)
    else:
        rows = await docs.list_documents(session)
    return {"documents": [_document_json(r) for r in rows]}


@router.delete("/memory/documents/{document_id}", status_code=204)
async def delete_document(document_id: str, _: Master, core: CoreDep,
                          session: SessionDep) -> Response:
    if not await docs.delete_document(session, document_id):
        raise NotFound(f"document {document_id} not found")
    _service(core).forget_stats()
    return Response(status_code=204)


def _document_json(row: dict[str, Any]) -> dict[str, Any]:
    scope_field = {"chat": "chat_id", "character": "character_id"}.get(row["scope_kind"])
    out = {k: row[k] for k in ("id", "name", "media_type", "size", "sha256", "chunks")}
    out["scope"] = row["scope_kind"]
    if scope_field:
        out[scope_field] = row["scope_id"]
    out["created_at"] = row["created_at"].isoformat() if row["created_at"] else None
    return out


# settings and search
@router.get("/memory/settings")
async def get_settings(_: Master, core: CoreDep, session: SessionDep) -> dict[str, Any]:
    return await _settings_json(_service(core), session)


@router.patch("/memory/settings")
async def patch_settings(body: SettingsPatch, _: Master, core: CoreDep,
                         session: SessionDep) -> dict[str, Any]:
    service = _service(core)
    if body.retrieval is not None:
        await service.set_options(session, body.retrieval)
    if "embeddings" in body.model_fields_set:
        await service.set_embeddings(session, body.embeddings)
    return await _settings_json(service, session)


async def _settings_json(service: MemoryService, session: Any) -> dict[str, Any]:
    from evacore.memory import _minilm
    from evacore.memory import embeddings as emb

    try:
        config = emb.parse_config(await get_setting(session, emb.SETTING_KEY))
    except InvalidInput:
        config = None
    return {
        "retrieval": (await service.options(session)).model_dump(),
        "embeddings": public_config(config),
        "minilm_available": _minilm.available(),
        "last_error": service.last_error,
    }


@router.post("/memory/search")
async def search_memory(body: SearchIn, _: Master, core: CoreDep,
                        session: SessionDep) -> dict[str, Any]:
    """What retrieval finds for a query in a chat (nothing is excluded, nothing inserted)."""
    chat = await session.get(Chat, body.chat_id)
    if chat is None:
        raise NotFound(f"chat {body.chat_id} not found")
    instance = (await _service(core).options(session)).model_dump()
    opts, _warning = merge_lenient(instance, (chat.settings or {}).get("retrieval"))
    # the messages no tour has needed indexed yet (every one was in its prompt) first
    state = dict(chat.state or {})
    retrieval = dict(state.get("retrieval") or {})
    if await docs.catch_up(session, chat.id, retrieval, opts):
        # the next one goes on from there (the chat's own update time is left alone)
        await session.execute(update(Chat).where(Chat.id == chat.id).values(
            state={**state, "retrieval": retrieval}, updated_at=Chat.updated_at))
    found = await search(_service(core), session, SearchQuery(
        keys=chat_keys(chat.id, chat.character_id, messages=opts.messages,
                       documents=opts.documents),
        texts=[body.query], options=opts, chat_id=chat.id,
        newest_position=max(0, (chat.next_position or 0) - 1),
    ))
    top_k = body.top_k or opts.top_k
    results = [
        {**c.summary(), "text": c.text, "passes_threshold": c.score >= opts.min_score}
        for c in found.ranked[:top_k]
    ]
    return {"results": results, **{k: v for k, v in found.diagnostics().items()
                                   if k in ("terms", "vector_model", "candidates_total")}}


# blocks
@router.post("/memory", status_code=201)
async def create_block(body: BlockIn, _: Master, session: SessionDep) -> dict[str, Any]:
    scope = await _scope(session, body.chat_id, body.character_id, body.user_id, required=True)
    assert scope is not None
    block = await repo.create_block(
        session, scope_kind=scope[0], scope_id=scope[1], label=body.label,
        content=body.content, mandatory=body.mandatory, read_only=body.read_only,
        limit=body.limit, position=body.position, role=body.role,
    )
    return repo.block_json(block)


@router.get("/memory")
async def list_blocks(
    _: Master, session: SessionDep,
    chat_id: Annotated[str | None, Query(max_length=32)] = None,
    character_id: Annotated[str | None, Query(max_length=32)] = None,
    user_id: Annotated[str | None, Query(max_length=32)] = None,
    inherited: Annotated[bool, Query(description="With chat_id: also the blocks of the "
                                     "chat's character and user (what its prompts show).")
                         ] = False,
) -> dict[str, Any]:
    given = [(k, v) for k, v in (("chat", chat_id), ("character", character_id),
                                 ("user", user_id)) if v is not None]
    if len(given) > 1:
        raise InvalidInput("give at most one of chat_id, character_id, user_id")
    if chat_id is not None and inherited:
        rows = await repo.blocks_for_chat(session, await repo.scopes_of_chat(session, chat_id))
    elif given:
        rows = await repo.list_blocks(session, given[0][0], given[0][1])
    else:
        rows = await repo.list_blocks(session)
    return {"blocks": [repo.block_json(b) for b in rows]}


@router.get("/memory/{block_id}")
async def get_block(block_id: str, _: Master, session: SessionDep) -> dict[str, Any]:
    return repo.block_json(await repo.get_block(session, block_id))


@router.patch("/memory/{block_id}")
async def patch_block(block_id: str, body: BlockPatch, _: Master,
                      session: SessionDep) -> dict[str, Any]:
    block = await repo.get_block(session, block_id)
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    return repo.block_json(await repo.update_block(session, block, changes))


@router.delete("/memory/{block_id}", status_code=204)
async def delete_block(block_id: str, _: Master, session: SessionDep) -> Response:
    block = await repo.get_block(session, block_id)
    await session.delete(block)
    return Response(status_code=204)
