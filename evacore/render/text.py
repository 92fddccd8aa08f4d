"""Text-mode rendering (stage 9, R2.9): a messages array into one instruct-formatted prompt.

Must not: fit the prompt into a budget (stage 7), post-process chat arrays (postprocess.py),
or talk to a provider; tool calls are not rendered here, only message text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from evacore.errors import InvalidInput
from evacore.render._names import Expand, substitute_names
from evacore.render._turns import Position, Role, Speakers, Turn, format_turn, generation_line
from evacore.render.examples import format_examples
from evacore.render.instruct import ContextTemplate, InstructTemplate, NamesBehavior
from evacore.render.stops import stop_strings
from evacore.render.story import IN_CHAT, wrap_story_string

__all__ = ["TEXT_MODES", "RenderedText", "render_text"]

TEXT_MODES: tuple[str, ...] = ("normal", "continue", "impersonate", "quiet")
_NARRATOR_ROLES = frozenset({"system", "developer", "tool"})
_STORY_ROLES: dict[int, Role] = {0: "narrator", 1: "user", 2: "assistant"}


@dataclass(frozen=True)
class RenderedText:
    """A rendered text-completion prompt and the stop strings to send with it."""

    prompt: str
    stop: list[str] = field(default_factory=list)


def _flatten(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text") or "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        return "\n\n".join(texts)
    raise InvalidInput("message content must be text or a list of parts")


def _to_turn(message: Mapping[str, Any], index: int, user: str, char: str) -> Turn:
    if not isinstance(message, Mapping):
        raise InvalidInput(f"message {index} is not an object", index=index)
    role = message.get("role")
    text = _flatten(message.get("content"))
    name = str(message.get("name") or "")
    forced = bool(message.get("force_avatar"))
    if role == "user":
        return Turn("user", text, name or user, forced)
    if role == "assistant":
        return Turn("assistant", text, name or char, forced)
    if role in _NARRATOR_ROLES:
        if role == "system" and name in ("example_user", "example_assistant"):
            example_role: Role = "user" if name == "example_user" else "assistant"
            return Turn(example_role, text, user if example_role == "user" else char, injected=True)
        return Turn("narrator", text, name)
    raise InvalidInput(f"message {index} has an unknown role {role!r}", index=index)


def render_text(
    messages: Sequence[Mapping[str, Any]],
    template: InstructTemplate,
    *,
    context: ContextTemplate | None = None,
    story_string: str = "",
    char_name: str,
    user_name: str,
    mode: str = "normal",
    prefill: str = "",
    examples: Sequence[str] = (),
    names_in_prompt: NamesBehavior | None = None,
    group_names: Sequence[str] = (),
    chat_truncated: bool = False,
    stop: Sequence[str] = (),
    expand: Expand | None = None,
) -> RenderedText:
    """Render `messages` (OpenAI-format dicts) with an instruct template.

    The prompt is: story string (wrapped in the story prefix/suffix, or injected into the
    chat when the context puts it in-chat) + formatted `examples` + chat start + the turns
    + the generation line. System/developer/tool messages are narrator turns; system
    messages named `example_user`/`example_assistant` are example turns. The first chat
    turn uses the `first_*` sequences unless `chat_truncated`; the last user turn uses
    `last_input_sequence`.

    Modes: `normal` opens the answer with the (last) output sequence and `prefill`;
    `continue` ends the prompt inside the last message (no suffix, no new sequence);
    `impersonate` opens a user turn instead; `quiet` renders the last message as a
    narrator instruction and opens the answer with `last_system_sequence`.
    `names_in_prompt` overrides the template's `names_behavior`; a non-empty
    `group_names` makes it a group chat. `expand` is applied to sequences after the
    built-in `{{user}}`/`{{char}}` substitution.
    """
    if mode not in TEXT_MODES:
        raise InvalidInput(
            f"unknown text render mode {mode!r}; valid modes: {', '.join(TEXT_MODES)}",
            mode=mode,
        )
    if names_in_prompt is not None and names_in_prompt not in get_args(NamesBehavior):
        raise InvalidInput(f"names_in_prompt must be one of {get_args(NamesBehavior)}")
    who = Speakers(
        user=user_name,
        char=char_name,
        names=names_in_prompt or template.names_behavior,
        is_group=bool(group_names),
        expand=expand,
    )
    turns = [_to_turn(m, i, user_name, char_name) for i, m in enumerate(messages)]
    quiet_turn: Turn | None = None
    if mode == "quiet":
        if not turns:
            raise InvalidInput("quiet mode needs the quiet instruction as the last message")
        last = turns.pop()
        quiet_turn = Turn("narrator", last.text, user_name)
    if mode == "continue" and not turns:
        raise InvalidInput("continue mode needs a message to continue")

    story_block = ""
    if story_string:
        if context is not None and context.story_string_position == IN_CHAT:
            depth = context.story_string_depth
            if mode == "continue" and depth == 0:
                depth = 1
            role = _STORY_ROLES.get(context.story_string_role, "narrator")
            name = {"user": user_name, "assistant": char_name}.get(role, "")
            turns.insert(max(0, len(turns) - depth), Turn(role, story_string, name, injected=True))
        else:
            story_block = wrap_story_string(
                story_string,
                template,
                context=context,
                user=user_name,
                char=char_name,
                expand=expand,
            )

    positions = _positions(turns, template, who, chat_truncated=chat_truncated, mode=mode)
    parts = [
        format_turn(
            turn,
            template,
            who,
            position,
            cut_after_text=(mode == "continue" and index == len(turns) - 1),
        )
        for index, (turn, position) in enumerate(zip(turns, positions, strict=True))
    ]
    if parts and mode not in ("continue", "quiet") and template.wrap:
        parts[-1] = parts[-1].removesuffix("\n")
    if quiet_turn is not None:
        parts.append(format_turn(quiet_turn, template, who))
    if mode != "continue":
        parts.append(generation_line(template, who, mode=mode, prefill=prefill))

    examples_text = ""
    if examples:
        examples_text = "".join(
            format_examples(
                examples,
                template,
                context=context,
                char_name=char_name,
                user_name=user_name,
                group_names=group_names,
                names_in_prompt=names_in_prompt,
                expand=expand,
            )
        )
    chat_start = ""
    if context is not None and context.chat_start:
        chat_start = (
            substitute_names(context.chat_start, user=user_name, char=char_name, expand=expand)
            + "\n"
        )

    stops = stop_strings(
        template,
        context,
        char_name=char_name,
        user_name=user_name,
        mode=mode,
        last_is_user=bool(turns) and mode == "continue" and turns[-1].role == "user",
        group_names=group_names,
        custom=stop,
        expand=expand,
    )
    prompt = story_block + examples_text + chat_start + "".join(parts)
    return RenderedText(prompt=prompt.replace("\r", ""), stop=stops)


def _positions(
    turns: list[Turn],
    template: InstructTemplate,
    who: Speakers,
    *,
    chat_truncated: bool,
    mode: str,
) -> list[Position]:
    """First/last markers; inserts the user alignment message when the chat opens without
    the user (it takes the first-input sequence)."""
    chat = [i for i, t in enumerate(turns) if t.role != "narrator" and not t.injected]
    positions = [Position.NORMAL] * len(turns)
    if chat and not chat_truncated:
        positions[chat[0]] = Position.FIRST
    users = [i for i in chat if turns[i].role == "user"]
    if users:
        positions[users[-1]] = Position.LAST
    if mode == "continue" and turns:
        positions[-1] = Position.LAST
    if template.user_alignment_message and (not chat or turns[chat[0]].role != "user"):
        text = substitute_names(
            template.user_alignment_message, user=who.user, char=who.char, expand=who.expand
        )
        at = chat[0] if chat else len(turns)
        turns.insert(at, Turn("user", text, who.user, injected=True))
        positions.insert(at, Position.FIRST)
    return positions
