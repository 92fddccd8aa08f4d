"""`/v1/chats` and their messages (R12.3): create (greetings become variants), read, edit.

Must not: generate (routes/generate.py does). A non-master sees only chats they own.
`settings` are typed at the door (domain/chat_settings.py) and every id a chat names is
checked against what the caller may use (routes/_refs.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.chat_settings import ChatSettingsField
from evacore.errors import InvalidInput, NotFound
from evacore.formats.limits import MAX_MESSAGE_CHARS
from evacore.memory.forget import forget_scope
from evacore.server.auth import AnyUser, Identity
from evacore.server.deps import SessionDep
from evacore.server.routes._refs import check_chat_refs
from evacore.store import chats as repo
from evacore.store.connections import default_connection
from evacore.store.tables import Character, Chat, LorebookLink, Persona, Variant

router = APIRouter(tags=["chats"])


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    connection_id: str | None = None
    character_id: str | None = None
    persona_id: str | None = None
    lorebook_ids: list[str] = Field(default_factory=list)
    title: str | None = Field(default=None, max_length=300)
    settings: ChatSettingsField = Field(default_factory=dict)


class ChatPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    connection_id: str | None = None
    character_id: str | None = None
    persona_id: str | None = None
    lorebook_ids: list[str] | None = None
    title: str | None = Field(default=None, max_length=300)
    settings: ChatSettingsField | None = None
    """Replaces the chat's settings as a whole."""


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str = Field(default="user", pattern="^(user|assistant|system)$")
    content: str = Field(max_length=MAX_MESSAGE_CHARS)
    name: str | None = Field(default=None, max_length=300)
    hidden: StrictBool = False


class MessagePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS)
    active_variant: str | None = None
    hidden: StrictBool | None = None


def chat_json(c: Chat, lorebook_ids: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title,
        "connection_id": c.connection_id,
        "character_id": c.character_id,
        "persona_id": c.persona_id,
        "lorebook_ids": lorebook_ids or [],
        "settings": c.settings or {},
        "variables": c.variables or {},
        "turn": c.turn,
        "user_id": c.user_id,
        "created_at": c.created_at.isoformat() if c.created_at else None,
        "updated_at": c.updated_at.isoformat() if c.updated_at else None,
    }


async def owned_chat(session: AsyncSession, chat_id: str, who: Identity) -> Chat:
    chat = await session.get(Chat, chat_id)
    if chat is None or (not who.is_master and chat.user_id != who.user_id):
        raise NotFound(f"chat {chat_id} not found")
    return chat


async def _chat_lorebooks(session: AsyncSession, chat_id: str) -> list[str]:
    rows = await session.scalars(
        select(LorebookLink.lorebook_id).where(
            LorebookLink.target_kind == "chat", LorebookLink.target_id == chat_id
        )
    )
    return list(rows.all())


def _check_settings(settings: dict[str, Any] | None) -> None:
    """The keys other packages own (typed in domain/chat_settings.py as objects): a chat's
    `world_info` validates like the global one, `retrieval` like the instance's (422)."""
    if not settings:
        return
    if settings.get("world_info") is not None:
        from evacore.services.lore import parse_world_info

        parse_world_info(settings["world_info"], strict=True)
    if settings.get("retrieval") is not None:
        from evacore.memory.options import merge

        merge(settings["retrieval"])


async def _check_refs(session: AsyncSession, body: ChatIn | ChatPatch, who: Identity,
                      chat_owner: str | None) -> None:
    _check_settings(body.settings)
    await check_chat_refs(session, who, chat_owner=chat_owner,
                          connection_id=body.connection_id, character_id=body.character_id,
                          persona_id=body.persona_id, lorebook_ids=body.lorebook_ids or ())


async def _set_lorebooks(session: AsyncSession, chat_id: str, ids: list[str]) -> None:
    existing = (
        await session.scalars(
            select(LorebookLink).where(
                LorebookLink.target_kind == "chat", LorebookLink.target_id == chat_id
            )
        )
    ).all()
    for link in existing:
        await session.delete(link)
    await session.flush()
    for lb in dict.fromkeys(ids):
        session.add(LorebookLink(lorebook_id=lb, target_kind="chat", target_id=chat_id))


async def add_greeting(session: AsyncSession, chat: Chat, character: Character | None,
                       user_name: str) -> None:
    """The card's greeting and alternate greetings become the first message's variants."""
    if character is None:
        return
    data = character.data or {}
    greetings = [g for g in [data.get("first_mes") or "", *(data.get("alternate_greetings")
                                                           or [])] if g and g.strip()]
    if not greetings:
        return
    from evacore.macros import MacroEngine, MacroEnv

    engine, env = MacroEngine(), MacroEnv(user=user_name, char=data.get("name") or "")
    msg = await repo.add_message(session, chat, role="assistant", name=data.get("name"))
    first = None
    for text in greetings:
        v = await repo.add_variant(session, msg, activate=False,
                                   content=engine.evaluate(text, env), finish_reason="greeting")
        first = first or v
    msg.active_variant_id = first.id if first else None


@router.post("/chats", status_code=201)
async def create_chat(body: ChatIn, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    await _check_refs(session, body, who, who.user_id)
    connection_id = body.connection_id
    if connection_id is None:
        connection_id = (await default_connection(session)).id
    chat = Chat(
        title=body.title or "", connection_id=connection_id, character_id=body.character_id,
        persona_id=body.persona_id, settings=body.settings, user_id=who.user_id,
    )
    session.add(chat)
    await session.flush()
    await _set_lorebooks(session, chat.id, body.lorebook_ids)
    character = await session.get(Character, body.character_id) if body.character_id else None
    persona = await session.get(Persona, body.persona_id) if body.persona_id else None
    if not chat.title:
        chat.title = character.name if character else "Chat"
    await add_greeting(session, chat, character, persona.name if persona else "User")
    await session.flush()
    return chat_json(chat, body.lorebook_ids)


@router.get("/chats")
async def list_chats(
    who: AnyUser, session: SessionDep, limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict[str, Any]:
    stmt = select(Chat).order_by(Chat.updated_at.desc()).offset(offset).limit(limit)
    if not who.is_master:
        stmt = stmt.where(Chat.user_id == who.user_id)
    return {"chats": [chat_json(c) for c in (await session.scalars(stmt)).all()]}


@router.get("/chats/{chat_id}")
async def get_chat(chat_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    chat = await owned_chat(session, chat_id, who)
    return chat_json(chat, await _chat_lorebooks(session, chat_id))


@router.patch("/chats/{chat_id}")
async def patch_chat(chat_id: str, body: ChatPatch, who: AnyUser,
                     session: SessionDep) -> dict[str, Any]:
    chat = await owned_chat(session, chat_id, who)
    await _check_refs(session, body, who, chat.user_id)
    for key in ("connection_id", "character_id", "persona_id", "title", "settings"):
        value = getattr(body, key)
        if value is not None:
            setattr(chat, key, value)
    if body.lorebook_ids is not None:
        await _set_lorebooks(session, chat.id, body.lorebook_ids)
    await session.flush()
    return chat_json(chat, await _chat_lorebooks(session, chat_id))


@router.delete("/chats/{chat_id}", status_code=204)
async def delete_chat(chat_id: str, who: AnyUser, session: SessionDep) -> Response:
    chat = await owned_chat(session, chat_id, who)
    from evacore.store.lorebooks import unlink_target

    await unlink_target(session, "chat", chat.id, drop_orphans=False)
    await forget_scope(session, "chat", chat.id)
    await session.delete(chat)
    return Response(status_code=204)


@router.get("/chats/{chat_id}/messages")
async def list_messages(
    chat_id: str, who: AnyUser, session: SessionDep,
    offset: int = Query(0, ge=0, le=1_000_000_000),
    limit: int | None = Query(None, ge=1, le=100_000),
) -> dict[str, Any]:
    await owned_chat(session, chat_id, who)
    msgs, variants = await repo.list_messages(session, chat_id, offset=offset, limit=limit)
    return {"messages": [repo.message_json(m, variants.get(m.id, [])) for m in msgs]}


@router.post("/chats/{chat_id}/messages", status_code=201)
async def add_message(chat_id: str, body: MessageIn, who: AnyUser,
                      session: SessionDep) -> dict[str, Any]:
    """Add a message without generating (e.g. a narrator line or a hand-written answer)."""
    chat = await owned_chat(session, chat_id, who)
    msg = await repo.add_message(session, chat, role=body.role, content=body.content,
                                 name=body.name, hidden=body.hidden)
    variants: list[Variant] = []
    if body.role == "assistant":
        variants.append(await repo.add_variant(session, msg, content=body.content,
                                               finish_reason="manual"))
    return repo.message_json(msg, variants)


@router.patch("/chats/{chat_id}/messages/{message_id}")
async def patch_message(chat_id: str, message_id: str, body: MessagePatch, who: AnyUser,
                        session: SessionDep) -> dict[str, Any]:
    await owned_chat(session, chat_id, who)
    msg = await repo.get_message(session, chat_id, message_id)
    variants = (await repo.variants_of(session, [msg.id])).get(msg.id, [])
    if body.active_variant is not None:
        if body.active_variant not in {v.id for v in variants}:
            raise InvalidInput(f"variant {body.active_variant} is not a variant of this message")
        msg.active_variant_id = body.active_variant
    if body.content is not None:
        active = next((v for v in variants if v.id == msg.active_variant_id), None)
        if active is not None:
            active.content = body.content
            if active.status in ("aborted", "failed"):
                active.status = "complete"  # edited by a person: it is theirs now, and whole
        else:
            msg.content = body.content
    if body.hidden is not None:
        msg.hidden = body.hidden
    await session.flush()
    return repo.message_json(msg, variants)


@router.delete("/chats/{chat_id}/messages/{message_id}", status_code=204)
async def delete_message(chat_id: str, message_id: str, who: AnyUser,
                         session: SessionDep) -> Response:
    await owned_chat(session, chat_id, who)
    msg = await repo.get_message(session, chat_id, message_id)
    await repo.delete_message(session, msg)
    return Response(status_code=204)
