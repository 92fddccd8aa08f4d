"""The records a chat refers to by id (connection, character, persona, lorebooks), checked
against what the caller may use, for every route that sets them (create, PATCH, import).

Who may use what follows the roles: connections, characters and lorebooks are shared (every
user reads them), so any existing one may be named (a missing one is a 422, as any invalid
reference). A persona is its user's own, so a non-master may name only their own: a
missing persona and another user's get the same 404, so a request cannot tell another
user's record from no record. A chat's persona must be one of the chat owner's; only a
master's own chats may use any (stage 1 ignores one that is not, so a row written before
this check leaks nothing).

Must not: change anything, or decide roles (auth.py does).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import InvalidInput, NotFound
from evacore.server.auth import Identity
from evacore.store.tables import Character, Connection, Lorebook, Persona

_SHARED = {"connection": Connection, "character": Character, "lorebook": Lorebook}


async def check_shared(session: AsyncSession, label: str, value: str | None) -> None:
    """A shared record (connection, character, lorebook) named by id must exist."""
    if value is not None and await session.get(_SHARED[label], value) is None:
        raise InvalidInput(f"{label} {value} does not exist")


async def check_persona(session: AsyncSession, persona_id: str | None, who: Identity,
                        chat_owner: str | None) -> None:
    """The persona a chat owned by `chat_owner` is to use, named by `who`."""
    if persona_id is None:
        return
    persona = await session.get(Persona, persona_id)
    if persona is None or (not who.is_master and persona.user_id != who.user_id):
        raise NotFound(f"persona {persona_id} not found")
    if persona.user_id != chat_owner and chat_owner != who.user_id:
        # the master sets another user's chat: it gets one of that user's personas
        raise InvalidInput(f"persona {persona_id} is not one of the chat owner's personas")


async def check_chat_refs(session: AsyncSession, who: Identity, *, chat_owner: str | None,
                          connection_id: str | None = None, character_id: str | None = None,
                          persona_id: str | None = None,
                          lorebook_ids: Iterable[str] = ()) -> None:
    """Every id a chat request names, in the order the body gives them."""
    await check_shared(session, "connection", connection_id)
    await check_shared(session, "character", character_id)
    await check_persona(session, persona_id, who, chat_owner)
    for lorebook_id in lorebook_ids:
        await check_shared(session, "lorebook", lorebook_id)
