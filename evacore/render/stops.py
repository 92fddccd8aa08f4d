"""Stop strings for a text-mode prompt: names, instruct sequences, context markers (§4.2).

Must not: cut answers (output clean-up belongs to the stream stage).
"""

from __future__ import annotations

from collections.abc import Sequence

from evacore.render._names import Expand, fill_name, substitute_names
from evacore.render.instruct import ContextTemplate, InstructTemplate

__all__ = ["instruct_stop_strings", "stop_strings"]


def instruct_stop_strings(
    template: InstructTemplate, *, char_name: str, user_name: str, expand: Expand | None = None
) -> list[str]:
    """`stop_sequence` (plus every sequence when `sequences_as_stop_strings`), split into
    lines, de-duplicated, whitespace-only lines skipped, `\\n` prepended when `wrap` is on."""
    t = template
    raw = [t.stop_sequence]
    if t.sequences_as_stop_strings:
        raw += [
            fill_name(t.input_sequence, user_name),
            fill_name(t.output_sequence, char_name),
            fill_name(t.first_output_sequence, char_name),
            fill_name(t.last_output_sequence, char_name),
            fill_name(t.system_sequence, "System"),
            fill_name(t.last_system_sequence, "System"),
        ]
    seen: set[str] = set()
    result: list[str] = []
    for sequence in raw:
        if not sequence:
            continue
        for line in sequence.split("\n"):
            if line in seen:
                continue
            seen.add(line)
            if not line.strip():
                continue
            stop = "\n" + line if t.wrap else line
            if t.macro:
                stop = substitute_names(stop, user=user_name, char=char_name, expand=expand)
            result.append(stop)
    return result


def stop_strings(
    template: InstructTemplate | None,
    context: ContextTemplate | None,
    *,
    char_name: str,
    user_name: str,
    mode: str = "normal",
    last_is_user: bool = False,
    group_names: Sequence[str] = (),
    custom: Sequence[str] = (),
    expand: Expand | None = None,
) -> list[str]:
    """All stop strings for one generation, in SillyTavern's order, without duplicates.

    Names (context `names_as_stop_strings`, on without a context): `\\n{user}:`, and
    `\\n{char}:` first when impersonating or when continuing a user message; other group
    members' names. Then the instruct sequences, then `\\n`+chat_start and
    `\\n`+example_separator (context `use_stop_strings`), then `custom`; `single_line`
    puts `\\n` first.
    """
    result: list[str] = []
    if context is None or context.names_as_stop_strings:
        user_stop, char_stop = f"\n{user_name}:", f"\n{char_name}:"
        result.append(char_stop if mode == "impersonate" else user_stop)
        result.append(user_stop)
        if mode == "continue" and last_is_user:
            result.append(char_stop)
        result += [f"\n{name}:" for name in group_names if name and name != char_name]
    if template is not None:
        result += instruct_stop_strings(
            template, char_name=char_name, user_name=user_name, expand=expand
        )
    if context is not None and context.use_stop_strings:
        for marker in (context.chat_start, context.example_separator):
            if marker:
                result.append(
                    "\n" + substitute_names(marker, user=user_name, char=char_name, expand=expand)
                )
    result += [stop for stop in custom if stop]
    if context is not None and context.single_line:
        result.insert(0, "\n")
    return list(dict.fromkeys(result))
