"""Instruct templates, context templates and system-prompt presets as data (R2.9).

Must not: render anything (story.py and text.py do), or read presets from anywhere but
SillyTavern-shaped dicts and the bundled files in `presets/`.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, ClassVar, Literal

from evacore.errors import NotFound
from evacore.render._st_model import STPreset

__all__ = [
    "DEFAULT_STORY_STRING",
    "ContextTemplate",
    "InstructTemplate",
    "NamesBehavior",
    "SystemPromptPreset",
    "bundled_context",
    "bundled_instruct",
    "list_bundled",
    "list_bundled_context",
]

NamesBehavior = Literal["none", "force", "always"]

DEFAULT_STORY_STRING = (
    "{{#if system}}{{system}}\n{{/if}}"
    "{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
    "{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}"
    "{{#if wiAfter}}{{wiAfter}}\n{{/if}}"
    "{{#if persona}}{{persona}}\n{{/if}}"
)


class InstructTemplate(STPreset):
    """A SillyTavern instruct template; field names and defaults are SillyTavern's."""

    kind: ClassVar[str] = "instruct"

    name: str = ""
    input_sequence: str = "### Instruction:"
    """Opens a user turn. `{{name}}` becomes the speaker's name when `macro` is on."""
    input_suffix: str = ""
    output_sequence: str = "### Response:"
    """Opens an assistant turn."""
    output_suffix: str = ""
    """Closes an assistant turn (the legacy `separator_sequence`)."""
    system_sequence: str = ""
    """Opens a narrator/system turn (unless `system_same_as_user`)."""
    system_suffix: str = ""
    first_input_sequence: str = ""
    """Replaces `input_sequence` for the chat's first message, when set."""
    first_output_sequence: str = ""
    last_input_sequence: str = ""
    """Replaces `input_sequence` for the last user message, when set."""
    last_output_sequence: str = ""
    """Replaces `output_sequence` on the generation line (and on a continued message)."""
    last_system_sequence: str = ""
    """Opens the answer of a quiet (background) generation, when set."""
    story_string_prefix: str = ""
    """Wraps the rendered story string (newer SillyTavern), joined by the wrap separator."""
    story_string_suffix: str = ""
    system_sequence_prefix: str = ""
    """SillyTavern ≤1.12: wraps the system prompt inside the story string."""
    system_sequence_suffix: str = ""
    stop_sequence: str = ""
    sequences_as_stop_strings: bool = True
    """Also stop on the input/output/system sequences, not only on `stop_sequence`."""
    wrap: bool = True
    """Join sequence and text with a newline (and end an empty suffix with one)."""
    macro: bool = True
    """Expand macros inside the sequences."""
    names_behavior: NamesBehavior = "force"
    """`none`, `force` (groups and forced names, never the user) or `always`."""
    activation_regex: str = ""
    """Select this template automatically when the model id matches."""
    bind_to_context: bool = False
    """Select the context template of the same name together with this one."""
    user_alignment_message: str = ""
    """Inserted as the first user turn when the chat does not start with the user."""
    system_same_as_user: bool = False
    """Narrator/system turns use the user sequences."""
    skip_examples: bool = False
    """Leave example dialogues unformatted; only their headings change."""

    @classmethod
    def _migrate(cls, data: dict[str, Any], keys: list[str]) -> None:
        if "separator_sequence" in data:
            data["output_suffix"] = data.pop("separator_sequence") or ""
            _rename_key(keys, "separator_sequence", "output_suffix")
        if "names" in data:
            names = data.pop("names")
            force_groups = data.pop("names_force_groups", None)
            data["names_behavior"] = "always" if names else ("force" if force_groups else "none")
            _rename_key(keys, "names", "names_behavior")
            if "names_force_groups" in keys:
                keys.remove("names_force_groups")
        behavior = data.get("names_behavior")
        if isinstance(behavior, int) and not isinstance(behavior, bool):
            data["names_behavior"] = {0: "none", 1: "force", 2: "always"}.get(behavior, "force")


class ContextTemplate(STPreset):
    """A SillyTavern context template: the story string and the chat's framing."""

    kind: ClassVar[str] = "context"

    name: str = ""
    story_string: str = DEFAULT_STORY_STRING
    """Handlebars-style template for the preamble (see evacore.render.story)."""
    example_separator: str = "***"
    """Heading line before each example dialogue block."""
    chat_start: str = "***"
    """Line emitted before the chat history."""
    use_stop_strings: bool = True
    """Also stop on `chat_start` and `example_separator`."""
    names_as_stop_strings: bool = True
    """Stop on `\\n{user}:` (and other speakers' names)."""
    always_force_name2: bool = True
    trim_sentences: bool = False
    single_line: bool = False
    """Stop on the first newline."""
    allow_jailbreak: bool = False
    """SillyTavern ≤1.12 only; kept for round trips."""
    story_string_position: int = 0
    """0: at the top of the prompt; 1: inside the chat at `story_string_depth`."""
    story_string_depth: int = 1
    story_string_role: int = 0
    """Role of the in-chat story string: 0 system, 1 user, 2 assistant."""


class SystemPromptPreset(STPreset):
    """A SillyTavern system-prompt preset."""

    kind: ClassVar[str] = "sysprompt"

    name: str = ""
    content: str = ""
    post_history: str = ""
    """Newer SillyTavern: instructions placed after the chat history."""


def _rename_key(keys: list[str], old: str, new: str) -> None:
    index = keys.index(old)
    if new in keys:
        keys.pop(index)
    else:
        keys[index] = new


# -- bundled presets ------------------------------------------------------------------------


@cache
def _bundled(folder: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    root = resources.files("evacore.render").joinpath("presets").joinpath(folder)
    for entry in root.iterdir():
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            found[data["name"]] = data
    return found


def _lookup(folder: str, name: str) -> dict[str, Any]:
    presets = _bundled(folder)
    if name in presets:
        return presets[name]
    for known, data in presets.items():
        if known.casefold() == name.casefold():
            return data
    raise NotFound(
        f"no bundled {folder} template named {name!r}; bundled: {', '.join(sorted(presets))}",
        name=name,
    )


def list_bundled() -> list[str]:
    """Names of the bundled instruct templates, sorted."""
    return sorted(_bundled("instruct"))


def list_bundled_context() -> list[str]:
    """Names of the bundled context templates, sorted."""
    return sorted(_bundled("context"))


def bundled_instruct(name: str) -> InstructTemplate:
    """A fresh copy of a bundled instruct template (name matched case-insensitively)."""
    return InstructTemplate.from_st(_lookup("instruct", name))


def bundled_context(name: str) -> ContextTemplate:
    """A fresh copy of a bundled context template (name matched case-insensitively)."""
    return ContextTemplate.from_st(_lookup("context", name))
