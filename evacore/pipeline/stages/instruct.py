"""Stage 9, instruct format rendering: chat mode keeps the structured array (post-processed
per R4 when the step is serialized); text mode renders one prompt string with stop strings.

Must not: send anything. Text connections (`openai-text`, `kobold`) get a renderer in
`tour.data["render_text"]` that stage 10 calls for each step's prompt copy.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_, select

from evacore.errors import InvalidInput, NotFound
from evacore.pipeline.chat_shape import CONTINUE_POSTFIX
from evacore.pipeline.chat_shape import prompt_messages as chat_prompt_messages
from evacore.pipeline.stages.character import TEXT_KINDS
from evacore.render import (
    ContextTemplate,
    InstructTemplate,
    SystemPromptPreset,
    bundled_context,
    bundled_instruct,
    list_bundled,
    migrate_story_string,
    render_chat_template,
    render_story_string,
    render_text,
)
from evacore.store.tables import Preset

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

PREFILL_MODES = ("normal", "regenerate", "swipe")
# Elements that go into the story string in text mode (by id or kind); the rest are turns.
_STORY_IDS = {
    "main": "system", "persona": "persona", "card.description": "description",
    "card.personality": "personality", "card.scenario": "scenario",
}
_MODEL_PRESETS = (
    (re.compile(r"llama[-_ ]?3|llama-?4", re.IGNORECASE), "Llama 3 Instruct"),
    (re.compile(r"mistral|mixtral", re.IGNORECASE), "Mistral V2 & V3"),
    (re.compile(r"gemma", re.IGNORECASE), "Gemma 2"),
    (re.compile(r"command-?r", re.IGNORECASE), "Command R"),
    (re.compile(r"phi-?3", re.IGNORECASE), "Phi"),
    (re.compile(r"vicuna", re.IGNORECASE), "Vicuna 1.1"),
    (re.compile(r"alpaca", re.IGNORECASE), "Alpaca"),
)


def prompt_messages(tour: Tour) -> list[dict[str, Any]]:
    """The prompt as OpenAI-format messages in SillyTavern's chat-completion shape (World
    Info and each in-chat (depth, role) group joined into one message each)."""
    return chat_prompt_messages(tour.prompt, tour.data["connection"]["params"])


async def resolve_templates(core: Core, conn: dict[str, Any]) -> tuple[InstructTemplate,
                                                                        ContextTemplate]:
    """The connection's instruct and context templates: a stored preset (by id or name), an
    inline SillyTavern object, a bundled preset by name, or a guess from the model name."""
    spec = conn.get("instruct") or {}
    instruct_spec = spec.get("preset") if isinstance(spec, dict) else spec
    context_spec = spec.get("context") if isinstance(spec, dict) else None
    # a name that is not a string (stored before the API checked it) names nothing
    instruct_spec = instruct_spec if isinstance(instruct_spec, str) else None
    context_spec = context_spec if isinstance(context_spec, str) else None
    model = conn.get("model") or ""
    if isinstance(spec, dict) and "input_sequence" in spec:
        instruct = InstructTemplate.from_st(spec)
        activated = None
    else:
        activated = None if instruct_spec else await _activated(core, model)
        name = instruct_spec or activated or _guess(model)
        instruct = await _load(core, "instruct", name)  # type: ignore[assignment]
    context_name = context_spec or instruct_spec or activated or _guess(model)
    try:
        context = await _load(core, "context", context_name)
    except NotFound:
        context = bundled_context("Default")
    # a 1.12 story string carrying the tokens a newer instruct preset wraps it in
    context = migrate_story_string(context, instruct)  # type: ignore[arg-type]
    return instruct, context  # type: ignore[return-value]


async def _activated(core: Core, model: str) -> str | None:
    """The first instruct preset (stored ones by name, then the bundled) whose
    `activation_regex` matches the model id (SillyTavern's auto-select)."""
    if not model:
        return None
    async with core.session() as s:
        rows = (await s.scalars(select(Preset).where(Preset.kind == "instruct")
                                .order_by(Preset.name, Preset.id))).all()
    candidates = [(r.name, r.data) for r in rows if isinstance(r.data, dict)]
    candidates += [(n, bundled_instruct(n).model_dump()) for n in list_bundled()]
    for name, data in candidates:
        pattern = data.get("activation_regex")
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        try:
            if re.search(pattern, model):
                return name
        except re.error:
            continue  # SillyTavern skips a broken pattern too
    return None


async def load_sysprompt(core: Core, conn: dict[str, Any]) -> SystemPromptPreset | None:
    """The connection's system-prompt preset (`instruct.sysprompt`: a stored `sysprompt`
    preset's name or id), or None."""
    spec = conn.get("instruct")
    name = spec.get("sysprompt") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name:
        return None
    async with core.session() as s:
        row = (await s.scalars(select(Preset).where(
            Preset.kind == "sysprompt", or_(Preset.id == name, Preset.name == name)))).first()
    if row is None:
        raise InvalidInput(f"the connection's system-prompt preset {name!r} is unknown")
    return SystemPromptPreset.from_st(row.data)


def _guess(model: str) -> str:
    for pattern, name in _MODEL_PRESETS:
        if pattern.search(model):
            return name
    return "ChatML"


async def _load(core: Core, kind: str, name: str) -> InstructTemplate | ContextTemplate:
    async with core.session() as s:
        row = (await s.scalars(select(Preset).where(
            Preset.kind == kind, or_(Preset.id == name, Preset.name == name)))).first()
    cls = InstructTemplate if kind == "instruct" else ContextTemplate
    if row is not None:
        return cls.from_st(row.data)
    return bundled_instruct(name) if kind == "instruct" else bundled_context(name)


class Instruct:
    number = 9
    name = "instruct"

    def _chat_template(self, tour: Tour, spec: dict[str, Any], template: str) -> None:
        """Text mode through the connection's Jinja chat template (`instruct.chat_template`,
        with `bos_token` / `eos_token`): the chat-mode messages rendered as the model's
        `apply_chat_template` would, the generation prompt added, the prefill appended."""
        bos = spec.get("bos_token") if isinstance(spec.get("bos_token"), str) else ""
        eos = spec.get("eos_token") if isinstance(spec.get("eos_token"), str) else ""

        def render(messages: list[dict[str, Any]], step_prefill: str) -> tuple[str, list[str]]:
            text = render_chat_template(template, [_plain(m) for m in messages],
                                        add_generation_prompt=True, bos_token=bos,
                                        eos_token=eos)
            return text + step_prefill, [eos] if eos else []

        tour.data["messages"] = prompt_messages(tour)
        tour.data["render_text"] = render
        tour.diagnostics["instruct"] = {"template": "chat_template", "mode": "text"}

    async def run(self, core: Core, tour: Tour) -> None:
        conn = tour.data["connection"]
        persona = tour.data["persona"]["name"]
        char = tour.data["character"].get("name") or "Assistant"
        # The connection's assistant prefill starts a new answer only (reference §5: not for
        # quiet or impersonate, and a continued text goes on right where it stopped); a
        # prefill given with the request is honoured in every mode.
        default = (conn.get("prefill") or "") if tour.mode in PREFILL_MODES else ""
        prefill = tour.params.get("prefill", default)
        prefill = tour.data["expand"](prefill) if prefill else ""
        # The client already has the text being continued: it sees only the new prefill.
        tour.data["prefill_client"] = prefill
        if conn["kind"] not in TEXT_KINDS:
            if tour.mode == "continue":
                # SillyTavern adds `continue_postfix` (a space by default) to a continued
                # text that does not end in one, and stores it with the continuation
                text = tour.data.get("continue_text", "")
                postfix = conn["params"].get("continue_postfix", CONTINUE_POSTFIX)
                if text and not text.endswith(" "):
                    text += postfix
                    tour.data["prefill_client"] = postfix + prefill
                    if not prefill and postfix.isspace():
                        # a continuation that opens with whitespace itself takes its place
                        tour.data["continue_postfix"] = postfix
                if tour.data.get("continue_nudge"):
                    # the text stays in the history; only the new prefill is sent
                    tour.data["prefill_request"] = prefill
                prefill = text + prefill
            tour.data["prefill"] = prefill
            tour.data["messages"] = prompt_messages(tour)
            tour.data["postprocess"] = {"mode": conn.get("postprocess") or "none",
                                        "char_name": char, "user_name": persona}
            return
        if tour.mode == "continue":
            prefill = tour.data.get("continue_text", "") + prefill
        tour.data["prefill"] = prefill
        spec = conn.get("instruct")
        template = spec.get("chat_template") if isinstance(spec, dict) else None
        if isinstance(template, str) and template.strip():
            self._chat_template(tour, spec, template)  # type: ignore[arg-type]
            return
        try:
            instruct, context = await resolve_templates(core, conn)
        except NotFound as exc:
            raise InvalidInput(f"the connection's instruct preset is unknown: {exc.message}"
                               ) from exc
        story_params: dict[str, Any] = {"char": char, "user": persona}
        before, after, blocks, turns = [], [], [], []
        for el in tour.prompt:
            if el.id in _STORY_IDS:
                story_params[_STORY_IDS[el.id]] = el.meta.get("raw", el.text)
            elif el.kind == "examples":
                if isinstance(el.meta.get("block"), str):
                    blocks.append(el.meta["block"])
            elif el.kind == "lore" and el.meta.get("position") in ("before_char", "after_char"):
                (before if el.meta["position"] == "before_char" else after).append(el.text)
            elif el.text.strip() or el.kind in ("history", "input"):
                turns.append(el.to_message())
        story_params["wiBefore"] = story_params["loreBefore"] = "\n".join(before)
        story_params["wiAfter"] = story_params["loreAfter"] = "\n".join(after)
        expand = tour.data["expand"]
        # render_text wraps the story in the instruct story prefix/suffix itself (once)
        story = render_story_string(context, story_params, instruct=instruct, expand=expand)
        mode = {"impersonate": "impersonate", "continue": "continue", "quiet": "quiet"}.get(
            tour.mode, "normal")
        truncated = not tour.data.get("history_reached_start", True)

        def render(messages: list[dict[str, Any]], step_prefill: str) -> tuple[str, list[str]]:
            msgs = list(messages)
            if mode == "continue" and step_prefill:
                msgs.append({"role": "assistant", "content": step_prefill})
            out = render_text(
                msgs, instruct, context=context, story_string=story, char_name=char,
                user_name=persona, mode=mode, prefill="" if mode == "continue" else step_prefill,
                examples=blocks, chat_truncated=truncated, expand=expand,
            )
            return out.prompt, out.stop

        tour.data["messages"] = turns
        tour.data["render_text"] = render
        tour.diagnostics["instruct"] = {"template": instruct.name if hasattr(instruct, "name")
                                        else None, "mode": "text"}


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message as a Hugging Face template reads it: role and text content."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content
                          if isinstance(p, dict) and p.get("type") == "text")
    out: dict[str, Any] = {"role": message["role"], "content": content or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out
