"""Store a SillyTavern chat (`StChat`) as a chat with messages and variants, and rebuild it.

Must not: parse or write JSONL itself (formats/st_chat.py does) or generate anything.
Swipes become variants (the active one per `swipe_id`); everything SillyTavern wrote that
has no column (message `extra`, unknown keys, raw dates, key order) is kept under
`messages.extra["st"]` / `variants.meta["st"]`, so an export gives the same chat back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id, utcnow
from evacore.formats.st_chat import StChat, StMessage, StVariant, parse_st_date
from evacore.importing._rows import checked_name, column_text, nul_free, ordered_ids
from evacore.store import chats as chat_repo
from evacore.store.bulk import Prepared
from evacore.store.tables import Character, Chat, Message, Persona, Variant

NOTE_KEYS = {"note_prompt": "text", "note_depth": "depth", "note_interval": "interval",
             "note_role": "role", "note_position": "position"}
"""SillyTavern `chat_metadata` author's-note keys → `chats.settings.authors_note` keys."""
_ROLES = ("system", "user", "assistant")
_POSITIONS = {0: "bottom", 1: "in_chat", 2: "top"}
"""ST 0 = after the main prompt, 1 = in chat at depth, 2 = before the main prompt."""
_TICK = timedelta(microseconds=1)


@dataclass
class StoredChat:
    chat: Chat
    messages: int = 0
    warnings: list[str] = field(default_factory=list)


def _int(raw: Any, default: int) -> int:
    try:
        return int(raw) if not isinstance(raw, bool) else default
    except (TypeError, ValueError, OverflowError):
        return default


def _note_value(key: str, raw: Any) -> Any:
    """One ST author's-note value in the form the pipeline reads."""
    if key == "note_prompt":
        return "" if raw is None else str(raw)
    if key in ("note_depth", "note_interval"):
        return _int(raw, 4 if key == "note_depth" else 1)
    names: tuple[str, ...] = _ROLES if key == "note_role" else tuple(_POSITIONS.values())
    if isinstance(raw, str) and raw in names:
        return raw
    number = _int(raw, -1)
    if key == "note_role":
        return _ROLES[number] if 0 <= number < len(_ROLES) else "system"
    return _POSITIONS.get(number, "in_chat")


def _note_back(key: str, value: Any) -> Any:
    if key == "note_role":
        return _ROLES.index(value) if value in _ROLES else 0
    if key == "note_position":
        return next((n for n, name in _POSITIONS.items() if name == value), 1)
    return value


def authors_note_from(chat_metadata: dict[str, Any]) -> dict[str, Any] | None:
    if not any(key in chat_metadata for key in NOTE_KEYS):
        return None
    return {ours: _note_value(st, chat_metadata.get(st)) for st, ours in NOTE_KEYS.items()}


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _moment(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None


def _has_swipes(m: StMessage) -> bool:
    return "swipes" in m.key_order and "swipes" not in m.other


def _variant_meta(v: StVariant) -> dict[str, Any]:
    return {"st": {
        "send_date": _iso(v.send_date), "gen_started": _iso(v.gen_started),
        "gen_finished": _iso(v.gen_finished), "extra": v.extra, "other": v.other,
        "raw_dates": v.raw_dates, "has_info": v.has_info,
    }}


Row = dict[str, Any]

def _message_rows(chat_id: str, st: StChat, warnings: list[str]) -> tuple[list[Row], list[Row]]:
    """Rows (plain dicts, every column) in file order; a message without a readable date
    takes the one before it (the first: the chat's `create_date`, else now)."""
    messages: list[Row] = []
    variants: list[Row] = []
    last = parse_st_date(st.header.get("create_date")) or utcnow()
    for position, (message_id, m) in enumerate(zip(ordered_ids(len(st.messages)),
                                                   st.messages, strict=True)):
        where = f"message {position + 1}"
        created = last = m.created_at or last
        row: Row = {
            "id": message_id, "chat_id": chat_id, "position": position, "role": m.role,
            "name": checked_name(nul_free(m.name, warnings, where), 300,
                                 f"the name of {where}"),
            "content": nul_free(m.content, warnings, where), "hidden": m.is_hidden,
            "images": [], "created_at": created, "active_variant_id": None,
            "extra": {"st": {"extra": m.extra, "other": m.other, "key_order": list(m.key_order),
                             "raw_send_date": m.raw_send_date, "created_at": _iso(m.created_at)}},
        }
        messages.append(row)
        if m.role != "assistant" and not _has_swipes(m):
            continue
        previous: datetime | None = None
        for index, (variant_id, v) in enumerate(zip(ordered_ids(len(m.variants)), m.variants,
                                                    strict=True)):
            moment = v.send_date or created
            if previous is not None and moment <= previous:
                moment = previous + _TICK
            previous = moment
            model = v.extra.get("model") if isinstance(v.extra.get("model"), str) else None
            variants.append({
                "id": variant_id, "message_id": message_id,
                "content": nul_free(v.content, warnings, f"{where}, swipe {index + 1}"),
                "finish_reason": "imported", "status": "complete", "steps": [], "usage": {},
                "timings": {}, "model": column_text(model, 300) if model else None,
                "tour_id": None, "created_at": moment, "meta": _variant_meta(v),
            })
            if index == m.active_index:
                row["active_variant_id"] = variant_id
    return messages, variants


async def store_st_chat(session: AsyncSession, st: StChat, *, user_id: str | None,
                        connection_id: str | None, character_id: str | None = None,
                        persona_id: str | None = None, title: str | None = None) -> StoredChat:
    """Insert the chat, its messages and their variants in the caller's transaction."""
    header = dict(st.header)
    meta: dict[str, Any] = {"user_name": st.user_name, "character_name": st.character_name,
                            **header}
    if not st.has_header:
        meta["headerless"] = True
    chat_metadata = header.get("chat_metadata")
    chat_metadata = chat_metadata if isinstance(chat_metadata, dict) else {}
    variables = chat_metadata.get("variables")
    settings: dict[str, Any] = {}
    note = authors_note_from(chat_metadata)
    if note is not None:
        settings["authors_note"] = note
    chat = Chat(
        id=new_id(), title=column_text(title or st.character_name or "Imported chat", 300) or "Imported chat",
        user_id=user_id, connection_id=connection_id, character_id=character_id,
        persona_id=persona_id, settings=settings, meta=meta,
        variables=dict(variables) if isinstance(variables, dict) else {},
        turn=sum(1 for m in st.messages if m.role == "assistant"),
        next_position=len(st.messages),
    )
    warnings: list[str] = []
    # Rows are built before the transaction writes anything (in a thread: a long chat is
    # seconds of work), so the write lock is held only for the inserts themselves.
    messages, variants = await asyncio.to_thread(_message_rows, chat.id, st, warnings)
    message_rows = await Prepared.prepare(session, Message.__table__, messages)
    variant_rows = await Prepared.prepare(session, Variant.__table__, variants)
    session.add(chat)
    await session.flush()
    await message_rows.write(session)
    await variant_rows.write(session)
    return StoredChat(chat, len(messages), warnings)


def _header(chat: Chat, meta: dict[str, Any]) -> dict[str, Any]:
    """The ST header keys other than the names, with current variables and author's note."""
    header = {k: v for k, v in meta.items()
              if k not in ("user_name", "character_name", "headerless")}
    if not meta:
        from evacore.formats.st_chat import format_create_date  # SillyTavern's own form

        created = chat.created_at if chat.created_at.tzinfo else chat.created_at.replace(
            tzinfo=UTC)
        header = {"create_date": format_create_date(created), "chat_metadata": {}}
    original = header.get("chat_metadata")
    chat_metadata = dict(original) if isinstance(original, dict) else {}
    raw_vars = chat_metadata.get("variables")
    if (chat.variables or {}) != (raw_vars if isinstance(raw_vars, dict) else {}):
        chat_metadata["variables"] = dict(chat.variables or {})
    note = (chat.settings or {}).get("authors_note")
    if isinstance(note, dict):
        for st_key, ours in NOTE_KEYS.items():
            if ours in note and _note_value(st_key, chat_metadata.get(st_key)) != note[ours]:
                chat_metadata[st_key] = _note_back(st_key, note[ours])
    if chat_metadata != (original if isinstance(original, dict) else {}):
        header["chat_metadata"] = chat_metadata
    return header


def _variant_out(v: Variant) -> StVariant:
    st = (v.meta or {}).get("st")
    if not isinstance(st, dict):
        return StVariant(v.content, send_date=_moment(_iso(v.created_at)))
    return StVariant(
        v.content, _moment(st.get("send_date")), _moment(st.get("gen_started")),
        _moment(st.get("gen_finished")), dict(st.get("extra") or {}),
        dict(st.get("other") or {}), dict(st.get("raw_dates") or {}), bool(st.get("has_info")),
    )


def _message_out(m: Message, variants: list[Variant], names: dict[str, str]) -> StMessage:
    st = (m.extra or {}).get("st")
    st = st if isinstance(st, dict) else None
    created = _moment(st.get("created_at")) if st else _moment(_iso(m.created_at))
    other = dict(st.get("other") or {}) if st else {}
    if variants:
        ids = [v.id for v in variants]
        active = ids.index(m.active_variant_id) if m.active_variant_id in ids else len(ids) - 1
        out_variants = [_variant_out(v) for v in variants]
        content = variants[active].content
    else:
        active, content = 0, m.content
        out_variants = [StVariant(content, created, parse_st_date(other.get("gen_started")),
                                  parse_st_date(other.get("gen_finished")))]
    role = m.role if m.role in _ROLES else "system"
    return StMessage(
        role=role,  # type: ignore[arg-type]
        name=m.name or names.get(role, ""), content=content, variants=out_variants,
        active_index=active, created_at=created,
        extra=dict(st.get("extra") or {}) if st else {}, is_hidden=m.hidden, other=other,
        raw_send_date=st.get("raw_send_date") if st else None,
        key_order=tuple(st.get("key_order") or ()) if st else (),
    )


async def chat_to_st(session: AsyncSession, chat: Chat) -> StChat:
    """The stored chat (imported or not) as an StChat for `write_st_chat`."""
    meta = dict(chat.meta or {})
    character = await session.get(Character, chat.character_id) if chat.character_id else None
    persona = await session.get(Persona, chat.persona_id) if chat.persona_id else None
    user_name = meta.get("user_name") or (persona.name if persona else "User")
    char_name = meta.get("character_name") or (character.name if character else chat.title)
    msgs, variants = await chat_repo.list_messages(session, chat.id)
    names = {"user": str(user_name), "assistant": str(char_name), "system": str(char_name)}
    return StChat(
        header=_header(chat, meta), user_name=str(user_name), character_name=str(char_name),
        messages=[_message_out(m, variants.get(m.id, []), names) for m in msgs],
        has_header=not meta.get("headerless"),
    )
