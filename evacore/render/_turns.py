"""One chat turn and the generation line, wrapped in instruct sequences (reference §4.2).

Must not: decide which turn is first or last, or assemble the prompt (text.py does both).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from evacore.render._names import Expand, fill_name, substitute_names
from evacore.render.instruct import InstructTemplate, NamesBehavior

Role = Literal["user", "assistant", "narrator"]


class Position(Enum):
    NORMAL = 0
    FIRST = 1
    LAST = 2


@dataclass
class Turn:
    role: Role
    text: str
    name: str
    forced_name: bool = False
    """SillyTavern's forced avatar (`/sendas`): `force` names apply outside groups too."""
    injected: bool = False
    """Placed by the renderer (in-chat story string), not part of the chat history."""


@dataclass(frozen=True)
class Speakers:
    user: str
    char: str
    names: NamesBehavior
    is_group: bool
    expand: Expand | None = None


def _sequence(text: str, template: InstructTemplate, who: Speakers, name: str) -> str:
    if not template.macro or not text:
        return text
    text = substitute_names(text, user=who.user, char=who.char, expand=who.expand)
    return fill_name(text, name or "System")


def _prefix(turn: Turn, template: InstructTemplate, position: Position) -> str:
    t = template
    if turn.role == "narrator":
        return t.input_sequence if t.system_same_as_user else t.system_sequence
    if turn.role == "user":
        if position is Position.FIRST:
            return t.first_input_sequence or t.input_sequence
        if position is Position.LAST:
            return t.last_input_sequence or t.input_sequence
        return t.input_sequence
    if position is Position.FIRST:
        return t.first_output_sequence or t.output_sequence
    if position is Position.LAST:
        return t.last_output_sequence or t.output_sequence
    return t.output_sequence


def _suffix(turn: Turn, template: InstructTemplate) -> str:
    if turn.role == "narrator":
        return template.input_suffix if template.system_same_as_user else template.system_suffix
    return template.input_suffix if turn.role == "user" else template.output_suffix


def _include_name(turn: Turn, who: Speakers) -> bool:
    if turn.role == "narrator":
        return False
    if who.names == "always":
        return True
    return who.names == "force" and (who.is_group or turn.forced_name) and turn.name != who.user


def format_turn(
    turn: Turn,
    template: InstructTemplate,
    who: Speakers,
    position: Position = Position.NORMAL,
    *,
    cut_after_text: bool = False,
) -> str:
    """`[prefix, ("Name: ")+text+suffix]` without empty pieces, joined by the wrap separator.

    `cut_after_text` (continue) leaves the suffix off so the model goes on with the text.
    """
    prefix = _sequence(_prefix(turn, template, position), template, who, turn.name)
    suffix = _sequence(_suffix(turn, template), template, who, turn.name)
    if not suffix and template.wrap:
        suffix = "\n"
    separator = "\n" if template.wrap else ""
    body = f"{turn.name}: {turn.text}" if _include_name(turn, who) and turn.name else turn.text
    pieces = [prefix, body] if cut_after_text else [prefix, body + suffix]
    return separator.join(piece for piece in pieces if piece)


def generation_line(
    template: InstructTemplate,
    who: Speakers,
    *,
    mode: str,
    prefill: str = "",
) -> str:
    """The line that opens the answer: the (last) output sequence, or the input sequence when
    impersonating, or `last_system_sequence` for a quiet generation; then the prefill.
    """
    t = template
    quiet = mode == "quiet"
    name = who.user if mode == "impersonate" else ("System" if quiet else who.char)
    include_names = (
        bool(name)
        and not quiet
        and (who.names == "always" or (who.is_group and who.names == "force"))
    )
    if mode == "impersonate":
        sequence = t.input_sequence
    elif quiet:
        sequence = t.last_system_sequence or t.output_sequence
    else:
        sequence = t.last_output_sequence or t.output_sequence
    filler = ""
    if (
        include_names
        and t.last_output_sequence
        and t.output_sequence
        and sequence == t.last_output_sequence
        and t.output_sequence[-1].isspace()
        and not t.last_output_sequence[-1].isspace()
    ):
        # Mistral: the output sequence ends in a space the last one lacks; keep it before the name.
        filler = t.output_sequence[-1]
    sequence = _sequence(sequence, t, who, name)
    separator = "\n" if t.wrap else ""
    if include_names:
        text = separator + sequence + separator + filler + f"{name}:"
    else:
        text = separator + sequence
    if quiet and separator:
        text = text[len(separator) :]
    if prefill:
        if include_names:
            text += prefill if prefill[:1].isspace() else " " + prefill
        else:
            text += separator + prefill.lstrip()
    return (text.rstrip() if t.wrap else text) + ("" if include_names else separator)
