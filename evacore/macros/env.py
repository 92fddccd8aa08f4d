"""The macro environment: every value a macro may read or change during one tour.

Must not: load anything from storage or compute chat facts itself; the Macros stage fills
it, and persists `local_vars`/`global_vars` after the tour (they are mutated in place).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def _utc_now() -> datetime:
    return datetime.now(UTC).astimezone()


class LazyRandom:
    """A random source made by `make` when a macro first draws from it: most tours draw
    nothing, and a generator's state is 2.5 KB and a few microseconds to seed."""

    __slots__ = ("_make", "_rng")

    def __init__(self, make: Callable[[], random.Random]) -> None:
        self._make = make
        self._rng: random.Random | None = None

    def __getattr__(self, name: str) -> Any:
        rng = self._rng
        if rng is None:
            rng = self._rng = self._make()
        return getattr(rng, name)


@dataclass(slots=True)
class MacroEnv:
    """Values macros read, and the two variable stores they write.

    Text fields hold the raw card/persona text; macros inside them are expanded when they
    are inserted through `{{description}}` and friends. An empty string means "not set".
    """

    # names
    user: str = "User"
    """Active persona name: `{{user}}`, `<USER>`."""
    char: str = ""
    """Character name: `{{char}}`, `<BOT>`, `<CHAR>`."""
    group_members: list[str] | None = None
    """Group member names; None outside a group (`{{group}}` then gives the char name)."""
    muted_members: list[str] = field(default_factory=list)
    """Muted group members, left out of `{{groupNotMuted}}`."""

    # card and persona fields
    description: str = ""
    personality: str = ""
    scenario: str = ""
    """Effective scenario (a chat-level override already applied by the caller)."""
    persona: str = ""
    """Persona description: `{{persona}}`."""
    mes_examples: str = ""
    """Example dialogues formatted for the prompt: `{{mesExamples}}`."""
    mes_examples_raw: str = ""
    """Example dialogues as written on the card: `{{mesExamplesRaw}}`."""
    system_prompt: str = ""
    """Effective system prompt: `{{systemPrompt}}`, `{{system}}`."""
    default_system_prompt: str = ""
    """The connection/preset default: `{{defaultSystemPrompt}}`, `{{instructSystem}}`."""
    char_prompt: str = ""
    """Card system prompt, only when "prefer character prompt" is on: `{{charPrompt}}`."""
    char_instruction: str = ""
    """Card post-history instructions, only when preferred: `{{charInstruction}}`."""
    char_depth_prompt: str = ""
    char_version: str = ""
    creator_notes: str = ""
    greetings: list[str] = field(default_factory=list)
    """First message then alternate greetings: `{{greeting::i}}` (0 = first message)."""
    original: str = ""
    """What `{{original}}` inserts (the overridden default); it expands once per text."""
    model: str = ""

    # chat facts
    chat_id: str = ""
    """Stable chat id (a branch passes its main chat's id); seeds `{{pick}}`."""
    last_message: str = ""
    last_user_message: str = ""
    last_char_message: str = ""
    last_message_id: int | None = None
    first_included_message_id: int | None = None
    last_swipe_id: int | None = None
    """Number of variants of the last message: `{{lastSwipeId}}`."""
    current_swipe_id: int | None = None
    """1-based active variant of the last message: `{{currentSwipeId}}`."""
    input: str = ""
    """The user's draft for this tour: `{{input}}`."""
    idle_since: datetime | None = None
    """Send time of the user message `{{idle_duration}}` measures from (the caller skips the
    newest non-system message first); None gives "just now"."""
    max_prompt: int | None = None
    max_context: int | None = None
    max_response: int | None = None
    generation_type: str = ""

    # instruct/context template values (empty when instruct mode is off)
    instruct: dict[str, str] = field(default_factory=dict)
    """SillyTavern instruct/context preset fields by their preset key, e.g.
    `input_sequence`, `output_sequence`, `stop_sequence`, `chat_start`, `example_separator`."""

    # state
    local_vars: dict[str, Any] = field(default_factory=dict)
    """Chat variables (persist with the chat). Values are str, int, float."""
    global_vars: dict[str, Any] = field(default_factory=dict)
    """Global variables (persist instance-wide)."""
    now: datetime = field(default_factory=_utc_now)
    """The tour's clock; aware datetimes keep their offset, naive ones are taken as local."""
    rng: random.Random | LazyRandom = field(default_factory=lambda: LazyRandom(random.Random))
    """Source of `{{random}}` and `{{roll}}`; seeded by the tour so it is reproducible."""
    outlets: dict[str, str] = field(default_factory=dict)
    """Lorebook outlet texts by outlet name: `{{outlet::name}}`."""
    banned: list[str] = field(default_factory=list)
    """Strings collected from `{{banned "…"}}` (for backends that accept banned strings)."""
    extra: dict[str, str] = field(default_factory=dict)
    """Caller-supplied macros: `{{key}}` → value (matched case-insensitively)."""
