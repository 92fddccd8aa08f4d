"""Example dialogues (`mes_example`) split into blocks and wrapped in instruct sequences.

Must not: expand macros in the example text beyond `{{user}}`/`{{char}}` (the macro stage
has already run), or decide whether examples fit the budget (stage 7 does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evacore.render._names import Expand, substitute_names
from evacore.render._turns import Speakers, Turn, format_turn
from evacore.render.instruct import ContextTemplate, InstructTemplate, NamesBehavior

__all__ = ["format_examples", "split_examples"]

_START = re.compile(r"<START>", re.IGNORECASE)
_START_LINE = re.compile(r"^[ \t]*<START>[^\n]*(?:\n|$)", re.IGNORECASE)


def split_examples(mes_example: str) -> list[str]:
    """Split a card's `mes_example` on `<START>` into blocks (text before the first marker
    counts as a block too); empty blocks are dropped, each block is stripped."""
    text = mes_example.replace("\r", "")
    blocks = [block.strip() for block in _START.split(text)]
    return [block for block in blocks if block]


@dataclass
class _Line:
    role: str
    lines: list[str]


def _parse_block(body: str, user: str, char: str) -> list[_Line]:
    turns: list[_Line] = []
    leading: list[str] = []
    for line in body.split("\n"):
        role = ""
        if user and line.startswith(f"{user}:"):
            role = "user"
        elif char and line.startswith(f"{char}:"):
            role = "assistant"
        if role and (not turns or turns[-1].role != role):
            turns.append(_Line(role, leading + [line]))
            leading = []
        elif turns:
            turns[-1].lines.append(line)
        else:
            leading.append(line)
    return turns


def _strip_speaker(turn: _Line, user: str, char: str) -> str:
    text = "\n".join(turn.lines)
    marker = f"{user if turn.role == 'user' else char}:"
    return text.replace(marker, "", 1).strip()


def format_examples(
    blocks: Sequence[str],
    template: InstructTemplate,
    *,
    context: ContextTemplate | None,
    char_name: str,
    user_name: str,
    group_names: Sequence[str] = (),
    names_in_prompt: NamesBehavior | None = None,
    expand: Expand | None = None,
) -> list[str]:
    """Format example blocks for a text prompt; the result joined by `""` is the examples text.

    Each block gets a heading (`example_separator` + newline, none when the separator is
    empty). Lines starting `{user}:` / `{char}:` open turns, wrapped in the input/output
    sequences; names follow `names_behavior` (`always`: both sides, `force`: the user side,
    groups: both). With `skip_examples` (or when no turn is found) the raw text is kept.
    """
    separator_text = context.example_separator if context is not None else ""
    heading = ""
    if separator_text:
        heading = substitute_names(separator_text, user=user_name, char=char_name, expand=expand)
        heading += "\n"
    bodies = []
    for block in blocks:
        text = substitute_names(block.replace("\r", ""), user=user_name, char=char_name)
        bodies.append(_START_LINE.sub("", text, count=1).strip())
    bodies = [body for body in bodies if body]
    raw = [f"{heading}{body}\n" for body in bodies]
    if template.skip_examples:
        return raw

    names = names_in_prompt or template.names_behavior
    group_names_in_text = bool(group_names) and names in ("always", "force")
    who = Speakers(user=user_name, char=char_name, names="none", is_group=False, expand=expand)
    formatted: list[str] = []
    for body in bodies:
        turns = _parse_block(body, user_name, char_name)
        if not turns:
            continue
        if heading:
            formatted.append(heading)
        for line in turns:
            is_user = line.role == "user"
            speaker = user_name if is_user else char_name
            content = _strip_speaker(line, user_name, char_name)
            show_name = not group_names_in_text and (
                names == "always" or (names == "force" and is_user)
            )
            if group_names_in_text or show_name:
                content = f"{speaker}: {content}"
            turn = Turn("user" if is_user else "assistant", content, speaker)
            formatted.append(format_turn(turn, template, who))
    return formatted or raw
