"""Story string rendering (R2.9): the context template's preamble, filled from card fields.

Must not: know the chat (text.py places the story in the prompt), or expand macros beyond
`{{user}}`/`{{char}}`/`{{trim}}` unless the caller passes `expand`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evacore.render import _handlebars
from evacore.render._names import Expand, apply_trim, fill_name, substitute_names
from evacore.render.instruct import ContextTemplate, InstructTemplate

__all__ = ["STORY_FIELDS", "render_handlebars", "render_story_string", "wrap_story_string"]

STORY_FIELDS: tuple[str, ...] = (
    "system",
    "description",
    "personality",
    "scenario",
    "persona",
    "char",
    "user",
    "wiBefore",
    "wiAfter",
    "loreBefore",
    "loreAfter",
    "mesExamples",
    "mesExamplesRaw",
    "anchorBefore",
    "anchorAfter",
)
"""The story parameters SillyTavern always defines (missing ones render as empty)."""

IN_CHAT = 1


def render_handlebars(source: str, params: Mapping[str, Any]) -> str:
    """Render the Handlebars subset: `{{x}}`, `{{{x}}}`, `{{#if x}}…{{else}}…{{/if}}`,
    `{{else if y}}`, `{{#unless x}}`, comments and `~` whitespace control.

    A mustache that is not a known parameter stays verbatim (macros run afterwards).
    A malformed block raises `InvalidInput`.
    """
    return _handlebars.render(source, params)


def _story_params(params: Mapping[str, Any]) -> dict[str, Any]:
    full: dict[str, Any] = {name: "" for name in STORY_FIELDS}
    full.update(params)
    for legacy, modern in (("loreBefore", "wiBefore"), ("loreAfter", "wiAfter")):
        if not full[modern] and full[legacy]:
            full[modern] = full[legacy]
        if not full[legacy] and full[modern]:
            full[legacy] = full[modern]
    return full


def render_story_string(
    template: ContextTemplate | str,
    params: Mapping[str, Any],
    *,
    instruct: InstructTemplate | None = None,
    expand: Expand | None = None,
) -> str:
    """Render a story string the way SillyTavern's text completion does.

    `params` holds the story parameters (`STORY_FIELDS`; others are allowed). Steps: the
    ≤1.12 `system_sequence_prefix/suffix` wrap `system`; the Handlebars pass; `{{user}}`/
    `{{char}}` (from `params`), then `expand`, then `{{trim}}`; leading newlines are
    stripped; a final newline is added when the story is not in-chat and either instruct
    mode is off (`instruct=None`) or `wrap` is on with an empty `story_string_suffix`.
    """
    source = template.story_string if isinstance(template, ContextTemplate) else template
    in_chat = isinstance(template, ContextTemplate) and template.story_string_position == IN_CHAT
    full = _story_params(params)
    if instruct is not None and full["system"]:
        full["system"] = _wrap_system_prompt(str(full["system"]), instruct)
    user, char = str(full["user"] or ""), str(full["char"] or "")

    output = render_handlebars(source, full)
    output = substitute_names(output, user=user, char=char, expand=expand)
    output = apply_trim(output).lstrip("\n")
    wants_newline = instruct is None or (instruct.wrap and not instruct.story_string_suffix)
    if output and not output.endswith("\n") and not in_chat and wants_newline:
        output += "\n"
    return output


def _wrap_system_prompt(system: str, instruct: InstructTemplate) -> str:
    separator = "\n" if instruct.wrap else ""
    if instruct.system_sequence_prefix:
        system = fill_name(instruct.system_sequence_prefix, "System") + separator + system
    if instruct.system_sequence_suffix:
        system = system + separator + instruct.system_sequence_suffix
    return system


def wrap_story_string(
    story: str,
    instruct: InstructTemplate,
    *,
    context: ContextTemplate | None = None,
    user: str = "",
    char: str = "",
    expand: Expand | None = None,
) -> str:
    """Wrap a rendered story with the instruct `story_string_prefix`/`suffix` (newer ST).

    The prefix is joined with the wrap separator, the suffix appended as is; `{{name}}` in
    the prefix is `System`. Nothing is wrapped for an empty story or an in-chat position.
    """
    if not story or (context is not None and context.story_string_position == IN_CHAT):
        return story
    separator = "\n" if instruct.wrap else ""
    if instruct.story_string_prefix:
        prefix = substitute_names(instruct.story_string_prefix, user=user, char=char, expand=expand)
        story = fill_name(prefix, "System") + separator + story
    if instruct.story_string_suffix:
        story = story + substitute_names(
            instruct.story_string_suffix, user=user, char=char, expand=expand
        )
    return story


def migrate_story_string(context: ContextTemplate, instruct: InstructTemplate) -> ContextTemplate:
    """A context template whose story string still carries the turn tokens (SillyTavern
    1.12's model templates: `<|im_start|>system\n…<|im_end|>`) used with a newer instruct
    preset that wraps the story itself (`story_string_prefix`/`suffix`): the story
    string's own copies are dropped, so the tokens appear once. Otherwise unchanged."""
    story = context.story_string
    prefix = instruct.story_string_prefix.strip()
    suffix = instruct.story_string_suffix.strip()
    changed = story
    if prefix and changed.lstrip().startswith(prefix):
        changed = changed.lstrip()[len(prefix):].removeprefix("\n")
    if suffix and changed.rstrip().endswith(suffix):
        changed = changed.rstrip()[: -len(suffix)]
    if changed == story:
        return context
    return context.model_copy(update={"story_string": changed})
