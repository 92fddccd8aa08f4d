"""Rendering for stage 9: chat-mode post-processing, instruct/context templates, text
prompts, story strings and Hugging Face chat templates (R2.9, R4, R12.7).

Must not: import the pipeline, providers or storage; everything here is a pure function
of its arguments (plus the bundled preset files).
"""

from evacore.render.examples import format_examples, split_examples
from evacore.render.instruct import (
    ContextTemplate,
    InstructTemplate,
    SystemPromptPreset,
    bundled_context,
    bundled_instruct,
    list_bundled,
    list_bundled_context,
)
from evacore.render.jinja import render_chat_template
from evacore.render.postprocess import postprocess_prompt
from evacore.render.stops import stop_strings
from evacore.render.story import migrate_story_string, render_story_string
from evacore.render.text import RenderedText, render_text

__all__ = [
    "ContextTemplate",
    "InstructTemplate",
    "RenderedText",
    "SystemPromptPreset",
    "bundled_context",
    "bundled_instruct",
    "format_examples",
    "list_bundled",
    "list_bundled_context",
    "migrate_story_string",
    "postprocess_prompt",
    "render_chat_template",
    "render_story_string",
    "render_text",
    "split_examples",
    "stop_strings",
]
