"""Stage 1, user input: load the chat and its parts, check the mode, commit the user's message.

Must not: build any prompt text. The user's message is committed here, in its own
transaction, before anything later can fail (R2.1 stage 1): it is never lost. Tours of one
chat take turns: this instance's by the manager's queue (chat_turns.py), other instances'
by the wait here, decided under the chat's lock.
Stored values are read through their typed shapes (domain/chat_settings.py,
domain/connection_params.py): a key written before those checks existed that does not fit
is left out (its default applies) and named in the tour's diagnostics (`ignored`), so old
bad data never fails a tour; the same holds for a persona that is not the chat owner's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from evacore.domain.chat_settings import read_chat_settings
from evacore.domain.connection_params import read_connection_params
from evacore.errors import ChatBusy, InvalidInput, NotFound
from evacore.logs import get_logger
from evacore.pipeline.tour import MODES
from evacore.store import chats as chat_store
from evacore.store import tour_writes
from evacore.store import tours as tour_store
from evacore.store.connections import default_connection
from evacore.store.lean import transact
from evacore.store.tables import User

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)

DEFAULT_CHARACTER: dict[str, Any] = {
    "name": "Assistant",
    "description": "{{char}} is a helpful, honest and friendly assistant who talks with {{user}}.",
    "personality": "",
    "scenario": "",
    "first_mes": "",
    "mes_example": "",
    "system_prompt": "",
    "post_history_instructions": "",
    "alternate_greetings": [],
    "extensions": {},
}


ELSEWHERE_POLL_SECONDS = 0.2
ELSEWHERE_WAIT_SECONDS = 120.0
"""How long a tour waits for its chat's tour on another instance (one whose instance died
is marked interrupted within 30 s, R14.5) before it is refused as `chat_busy`."""


class _TakenElsewhere(Exception):
    def __init__(self, tour_id: str) -> None:
        super().__init__(tour_id)
        self.tour_id = tour_id


class UserInput:
    number = 1
    name = "user_input"

    async def run(self, core: Core, tour: Tour) -> None:
        if tour.mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
        waited = 0.0
        while True:
            try:
                return await self._open(core, tour)
            except _TakenElsewhere as taken:
                if waited >= ELSEWHERE_WAIT_SECONDS:
                    raise ChatBusy(f"chat {tour.chat_id} is busy with tour {taken.tour_id} "
                                   "on another instance") from None
                await asyncio.sleep(ELSEWHERE_POLL_SECONDS)
                waited += ELSEWHERE_POLL_SECONDS

    async def _open(self, core: Core, tour: Tour) -> None:
        """One transaction: the chat read under its row lock, the tour's record and the
        user's message written, unless a tour of the chat runs on another instance (then
        nothing is written and `_TakenElsewhere` says which)."""
        await transact(core.db, lambda s: self._open_in(s, core, tour))

    async def _open_in(self, s: Any, core: Core, tour: Tour) -> None:
        chat, connection, character, persona = await chat_store.chat_with_parts(
            s, tour.chat_id, lock=True)
        if tour.user_id and tour.role != "master" and chat.user_id != tour.user_id:
            raise NotFound(f"chat {tour.chat_id} not found")
        if chat.connection_id is None:
            # its connection was deleted (or unset): the one chats get when they name
            # none, as a new chat would (R14.0), until the chat names one again
            connection = await default_connection(s)
        if connection is None:
            raise NotFound(f"connection {chat.connection_id} not found")
        # The record and the check for another instance's tour in one statement: on
        # SQLite its insert takes the write lock, on PostgreSQL the chat's row lock is
        # held, so the check sees every other instance's tour.
        if not await tour_writes.open_tour(
            s, id=tour.id, chat_id=chat.id, user_id=tour.user_id, mode=tour.mode,
            env=tour.env, instance_id=core.instance_id,
        ):
            other = await tour_store.running_elsewhere(s, chat.id, core.instance_id)
            raise _TakenElsewhere(other or "?")
        settings, ignored = read_chat_settings(chat.settings)
        params, bad_params = read_connection_params(connection.params)
        ignored += bad_params
        if persona is not None and not await _persona_allowed(s, persona, chat):
            ignored.append(f"persona {persona.id} is not one of the chat owner's; ignored")
            persona = None
        if tour.input_images and "picture" not in (tour.env_overrides or {}):
            tour.env["picture"] = bool(connection.vision)
        # A normal turn with input needs nothing from the last message.
        needs_last = tour.mode != "normal" or not (tour.input_text or tour.input_images)
        last = await chat_store.last_message(s, chat.id) if needs_last else None
        target = await self._target(s, tour, chat, last)
        user_message_id = None
        if tour.mode == "normal" and (tour.input_text or tour.input_images):
            written = await tour_writes.add_message(
                s, chat.id, role="user", content=tour.input_text,
                images=tour.input_images, name=persona.name if persona else "User",
            )
            if written is None:
                raise NotFound(f"chat {tour.chat_id} not found")
            user_message_id = written["id"]
        elif tour.mode == "normal" and last is None:
            raise InvalidInput("the message is empty")
        if ignored:
            tour.diagnostics["ignored"] = ignored
            log.warning("tour.stored_values_ignored", chat_id=chat.id, problems=ignored)
        tour.data.update(
            chat={
                "id": chat.id, "title": chat.title, "settings": settings,
                "variables": dict(chat.variables or {}), "state": dict(chat.state or {}),
                "turn": chat.turn, "character_id": chat.character_id,
                "persona_id": persona.id if persona else None, "user_id": chat.user_id,
            },
            connection=connection_snapshot(connection, params),
            character=dict(character.data) if character else dict(DEFAULT_CHARACTER),
            character_id=character.id if character else None,
            persona={
                "name": persona.name if persona else "User",
                "description": persona.description if persona else "",
                "id": persona.id if persona else None,
            },
            user_message_id=user_message_id,
            target_message_id=target,
        )

    async def _target(self, s: Any, tour: Tour, chat: Any, last: Any) -> str | None:
        """The assistant message that regenerate/swipe/continue works on."""
        if tour.mode in ("swipe", "continue"):
            if last is None or last.role != "assistant":
                raise InvalidInput(f"{tour.mode} needs an assistant message at the end of the chat")
            return last.id
        if tour.mode == "regenerate":
            if last is None:
                raise NotFound("there is nothing to regenerate in this chat")
            return last.id if last.role == "assistant" else None
        return None


def connection_snapshot(c: Any, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The connection record as plain data; the API key stays inside this tour only.
    `params`: the record's params as read (bad keys left out), else the stored ones."""
    return {
        "id": c.id, "name": c.name, "kind": c.kind, "base_url": c.base_url,
        "api_key": c.api_key, "model": c.model, "context_size": c.context_size,
        "max_tokens": c.max_tokens, "tokenizer": c.tokenizer, "vision": c.vision,
        "prefill": c.prefill, "postprocess": c.postprocess, "instruct": c.instruct,
        "params": dict(c.params or {}) if params is None else params,
    }


async def _persona_allowed(s: Any, persona: Any, chat: Any) -> bool:
    """A chat uses one of its owner's personas; a master's chats may use any (the API
    refuses other pairs, routes/_refs.py; this keeps rows written before from leaking one
    user's persona into another's prompt)."""
    if persona.user_id == chat.user_id:
        return True
    owner = await s.get(User, chat.user_id) if chat.user_id else None
    return owner is not None and owner.role == "master"
