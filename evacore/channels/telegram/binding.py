"""One evacore chat per Telegram chat (R14.2): made on the chat's first message with the
configured connection and character, replaced by a fresh one on `/new`.

A private chat belongs to its sender's user; a group's chat to the master (everyone the
channel answers there talks in it). Must not: start tours or talk to Telegram.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from evacore.errors import InvalidInput
from evacore.store import telegram as store
from evacore.store.connections import default_connection
from evacore.store.tables import Character, Chat, Connection

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.config import TelegramSettings

TITLE_CHARS = 80


@dataclass(frozen=True)
class Bound:
    """The chat a Telegram chat talks in, and whether its connection sees images."""

    chat_id: str
    owner_id: str | None
    vision: bool
    created: bool = False


async def _by_id_or_name(s: AsyncSession, table: type, ref: str) -> object | None:
    row = await s.get(table, ref)
    if row is not None:
        return row
    stmt = select(table).order_by(table.created_at)  # type: ignore[attr-defined]
    for candidate in (await s.scalars(stmt)).all():
        if candidate.name.casefold() == ref.casefold():
            return candidate
    return None


async def targets(s: AsyncSession, settings: TelegramSettings) -> tuple[Connection,
                                                                         Character | None]:
    """The connection and character new chats get (`CONNECTION`, `CHARACTER`); a name or id
    that matches nothing is an error saying which setting is wrong."""
    if settings.connection:
        connection = await _by_id_or_name(s, Connection, settings.connection)
        if connection is None:
            raise InvalidInput(f"telegram.connection {settings.connection!r} names no "
                               "connection (an id or a name)")
    else:
        connection = await default_connection(s)
    character = None
    if settings.character:
        character = await _by_id_or_name(s, Character, settings.character)
        if character is None:
            raise InvalidInput(f"telegram.character {settings.character!r} names no "
                               "character (an id or a name)")
    assert isinstance(connection, Connection)
    return connection, character if isinstance(character, Character) else None


async def chat_for(s: AsyncSession, settings: TelegramSettings, telegram_chat_id: int, *,
                   kind: str, title: str, owner_id: str | None, fresh: bool = False) -> Bound:
    """The chat this Telegram chat talks in (made now when it has none, or when `fresh`)."""
    if not fresh:
        chat_id = await store.bound_chat(s, telegram_chat_id)
        if chat_id is not None:
            chat = await s.get(Chat, chat_id)
            if chat is not None:
                connection = await s.get(Connection, chat.connection_id) \
                    if chat.connection_id else None
                return Bound(chat.id, chat.user_id, bool(connection and connection.vision))
    connection, character = await targets(s, settings)
    chat = Chat(title=(title or "Telegram")[:TITLE_CHARS], connection_id=connection.id,
                character_id=character.id if character else None, user_id=owner_id,
                settings={}, meta={"telegram": {"chat_id": telegram_chat_id, "type": kind}})
    s.add(chat)
    await s.flush()
    await store.bind_chat(s, telegram_chat_id, chat.id, kind)
    return Bound(chat.id, owner_id, bool(connection.vision), created=True)
