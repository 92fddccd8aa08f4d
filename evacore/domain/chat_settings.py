"""Typed `settings` of a chat (R12.3): the keys the pipeline reads — `scenario`,
`system_prompt`, `post_history`, `prompt_order` (stage 3), `authors_note` (stages 3-4),
`world_info` (stage 4) and `retrieval` (stage 5) — with their types and ranges. Other keys
are kept as they are (a client may store its own), as long as they are JSON values.

At the door `ChatSettingsField` refuses what does not fit (422, nothing stored);
`world_info` and `retrieval` are objects here and their keys are checked by the lore and
memory packages, which own them. On the read side `read_chat_settings` leaves out each bad
key of a chat stored before these checks existed (a warning goes to the tour's diagnostics)
and the tour goes on with the default for it: bad stored data never fails a tour.

Must not: read storage, or know what the lore and memory settings mean.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from evacore.domain._typed import ABSENT, check_object, object_schema, read_object
from evacore.domain.connection_params import PromptOrder

NOTE_DEPTH_MAX = 10_000
"""Deepest an author's note may sit (history messages from the end)."""
NOTE_INTERVAL_MAX = 10_000
"""Longest interval (in turns) between two insertions of an author's note."""

Text = Annotated[str, Field(strict=True, max_length=1_000_000)]
Role = Literal["system", "user", "assistant"]


class AuthorsNote(BaseModel):
    """The chat's author's note (SillyTavern's `note_*` keys, imported as these): `text`
    inserted every `interval` turns (0 and 1: every turn) at `position` — `in_chat` at
    `depth` messages from the end, `top` / `bottom` before / after the main prompt — with
    `role`; `scan` lets the lorebook scan read it. `null` means the default (except depth)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: Text | None = None
    interval: Annotated[int, Field(strict=True, ge=0, le=NOTE_INTERVAL_MAX)] | None = None
    depth: Annotated[int, Field(strict=True, ge=0, le=NOTE_DEPTH_MAX)] = ABSENT
    role: Role | None = None
    position: Literal["in_chat", "top", "bottom"] | None = None
    scan: bool | None = None


class ChatSettings(BaseModel):
    """What a chat overrides: a `null` key means "not set" (the character's or the
    connection's value applies)."""

    model_config = ConfigDict(extra="allow", strict=True)
    scenario: Text | None = None
    """Replaces the card's scenario."""
    system_prompt: Text | None = None
    """The default main prompt (a card's own system prompt still wins; `{{original}}` in it
    inserts this one)."""
    post_history: Text | None = None
    """The default post-history instructions (the card's win the same way)."""
    prompt_order: PromptOrder | None = None
    """The prompt-manager order of stage 3; empty = the connection's, else the default."""
    authors_note: AuthorsNote | None = None
    world_info: dict[str, Any] | None = None
    """World Info settings over the global ones (SillyTavern names; lore checks the keys)."""
    retrieval: dict[str, Any] | None = None
    """Retrieval options over the instance's (docs/memory.md; memory checks the keys)."""


def check_chat_settings(value: Any) -> dict[str, Any]:
    """A chat's `settings` as given, or a validation error naming the first bad keys."""
    return check_object(ChatSettings, value)


def read_chat_settings(value: Any) -> tuple[dict[str, Any], list[str]]:
    """A stored chat's `settings` with every key that does not fit left out (the default
    applies), and a warning per key left out."""
    return read_object(ChatSettings, value, "chat settings")


ChatSettingsField = Annotated[dict[str, Any], AfterValidator(check_chat_settings),
                              WithJsonSchema(object_schema(ChatSettings))]
