"""How a stored tool result is put into a prompt copy (R5.3): the `(empty)` marker and the cap.

Must not: change what is stored or streamed (that is the tool's exact output, §13), or add
reminders (the stream-rules engine puts those on top of `cut_output`'s text, R6.5).
"""

from __future__ import annotations

EMPTY_MARKER = "(empty)"
"""Stands in, in prompts only, for a tool output that is the empty string."""

CUT_NOTE = "\n[… cut {cut} of {total} characters]"
"""Appended to an output cut to the cap; `cut` and `total` count characters of the output."""

DEFAULT_MAX_CHARS = 20_000
"""`context.tool_result_max_chars` when the settings give none."""


def cut_output(output: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The output cut to `max_chars` characters plus CUT_NOTE, or unchanged when it fits."""
    if max_chars < 0:
        raise ValueError("max_chars must not be negative")
    if len(output) <= max_chars:
        return output
    return output[:max_chars] + CUT_NOTE.format(cut=len(output) - max_chars, total=len(output))


def prompt_result(output: str, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text a stored tool result has in a prompt: EMPTY_MARKER if empty, else `cut_output`."""
    if output == "":
        return EMPTY_MARKER
    return cut_output(output, max_chars)
