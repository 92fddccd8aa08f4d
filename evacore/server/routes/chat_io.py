"""`POST /v1/chats/import` and `GET /v1/chats/{id}/export` (R8.2): SillyTavern chat JSONL in
and out; a re-import of an export gives an equal chat.

Must not: parse JSONL (formats/st_chat.py) or map it to rows (importing/chats.py).
Importing needs a trusted user or the master; the chat belongs to the importer, and the
ids it names are checked as for a new chat (routes/_refs.py). Export follows chat ownership
(the owner or the master).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Query, Request, Response

from evacore.errors import BadRequest
from evacore.formats.st_chat import read_st_chat, write_st_chat
from evacore.importing.chats import chat_to_st, store_st_chat
from evacore.importing.upload import download_headers, import_limits, read_upload, upload_body
from evacore.server.auth import AnyUser, Trusted
from evacore.server.deps import CoreDep, SessionDep
from evacore.server.routes._refs import check_chat_refs
from evacore.server.routes.chats import chat_json, owned_chat
from evacore.store.connections import default_connection

router = APIRouter(tags=["chats"])

_FIELDS = {
    "character_id": {"type": "string", "description": "The character the chat talks to."},
    "connection_id": {"type": "string", "description": "Default: the built-in mock."},
    "persona_id": {"type": "string"},
    "title": {"type": "string"},
}


@router.post("/chats/import", status_code=201, openapi_extra=upload_body(fields=_FIELDS))
async def import_chat(request: Request, who: Trusted, core: CoreDep) -> dict[str, Any]:
    """Import a SillyTavern chat JSONL (`file`): swipes become variants, hidden messages stay
    hidden, `chat_metadata` variables and author's note become the chat's."""
    limits = import_limits(core)
    upload = await read_upload(request, limits, max_lines=limits.max_chat_messages)
    st = await asyncio.to_thread(read_st_chat, upload.content, limits)
    fields = upload.fields
    async with core.session() as s:
        character_id = fields.get("character_id") or None
        persona_id = fields.get("persona_id") or None
        connection_id = fields.get("connection_id") or None
        await check_chat_refs(s, who, chat_owner=who.user_id, connection_id=connection_id,
                              character_id=character_id, persona_id=persona_id)
        if connection_id is None:
            connection_id = (await default_connection(s)).id
        stored = await store_st_chat(
            s, st, user_id=who.user_id, connection_id=connection_id,
            character_id=character_id, persona_id=persona_id, title=fields.get("title"),
        )
        body = chat_json(stored.chat)
        if await request.is_disconnected():
            # nobody is left to learn the chat's id: store nothing rather than a stray copy
            raise BadRequest("the client disconnected during the import; nothing was stored")
    body.update(messages=stored.messages, warnings=stored.warnings)
    return body


@router.get("/chats/{chat_id}/export",
            responses={200: {"content": {"application/jsonl": {}}}})
async def export_chat(chat_id: str, who: AnyUser, session: SessionDep,
                      format: Literal["jsonl"] = Query("jsonl")) -> Response:
    """The chat as SillyTavern JSONL (header line, then one message per line)."""
    chat = await owned_chat(session, chat_id, who)
    data = write_st_chat(await chat_to_st(session, chat))
    return Response(content=data, media_type="application/jsonl",
                    headers=download_headers(chat.title or "chat", "jsonl"))
