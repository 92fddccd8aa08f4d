"""Stage 3, character/persona: assemble the ordered prompt from the card, persona and history.

Must not: fit the budget (stage 7) or insert lore/memory (stages 4-5). It reads history
newest-first and stops once it has clearly more than the budget can hold (R2.7 bench:
cost must not grow with the chat's length). Every element gets a stable id and source.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evacore.domain.images import image_part
from evacore.pipeline.chat_shape import (
    KEY_AUTHORS_NOTE,
    KEY_CHARACTER_NOTE,
    example_elements,
    insert_injection,
    setting,
    with_last_chat_message,
)
from evacore.pipeline.reads import reads
from evacore.prompt.elements import Element
from evacore.render.tool_results import DEFAULT_MAX_CHARS, prompt_result
from evacore.store import chats as chat_store

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour
    from evacore.store.chats import HistoryMessage

DEFAULT_MAIN = (
    "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
)
IMPERSONATE_PROMPT = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so far "
    "as a guideline for the writing style of {{user}}. Don't write as {{char}} or system. "
    "Don't describe actions of {{char}}.]"
)
# SillyTavern's default prompt-manager order (chat mode); configurable per connection or chat.
DEFAULT_ORDER = (
    "main", "wi_before", "persona", "description", "personality", "scenario", "wi_after",
    "examples", "history", "post_history",
)
_START = re.compile(r"<START>", re.IGNORECASE)
# History is read until its characters clearly exceed the budget (heuristic chars/token).
_CHARS_PER_TOKEN_CEILING = 6.0
TEXT_KINDS = ("openai-text", "kobold")
"""Connections that get one rendered text prompt (stage 9) rather than messages."""
UNANSWERED = "error: no result; the tour ended before this call finished"
"""The prompt text of a stored call without a stored result (never stored itself)."""


def split_examples(raw: str) -> list[str]:
    """Example dialogues split on `<START>` into blocks (R2.3); empty blocks dropped."""
    text = raw.replace("\r\n", "\n")
    return [b.strip() for b in _START.split(text) if b.strip()]


_ORIGINAL = re.compile(r"\{\{original\}\}", re.IGNORECASE)


def with_original(text: str, original: str) -> str:
    """`{{original}}` in a card's system prompt or post-history instructions (R2.3): the
    first occurrence inserts the default, later ones insert nothing (as in SillyTavern)."""
    parts = _ORIGINAL.split(text)
    if len(parts) == 1:
        return text
    return parts[0] + original + "".join(parts[1:])


class Character:
    number = 3
    name = "character"

    async def run(self, core: Core, tour: Tour) -> None:
        expand = tour.data["expand"]
        card: dict[str, Any] = tour.data["character"]
        chat_settings = tour.data["chat"]["settings"]
        conn = tour.data["connection"]
        params = conn["params"]
        order = chat_settings.get("prompt_order") or params.get("prompt_order") or DEFAULT_ORDER
        default_main, default_post = prompt_defaults(tour)
        main = card.get("system_prompt") or ""
        main = with_original(main, default_main) if main else default_main
        post = card.get("post_history_instructions") or ""
        post = with_original(post, default_post) if post else default_post
        if tour.mode == "impersonate":
            post = (post + "\n" if post else "") + (params.get("impersonate_prompt") or IMPERSONATE_PROMPT)
        p = tour.prompt
        chat_mode = conn["kind"] not in TEXT_KINDS
        # SillyTavern's chat-completion continue: without `continue_prefill` the message
        # stays in the history and a nudge after it asks for the continuation
        nudge = chat_mode and not params.get("continue_prefill")
        tour.data["continue_nudge"] = nudge and tour.mode == "continue"
        for key in order:
            if key == "main":
                p.append(_el("main", "system", expand(main), "card.system_prompt"
                             if card.get("system_prompt") else "connection.system_prompt",
                             "system", protected=True))
            elif key == "persona":
                p.append(_el("persona", "system", expand(tour.data["persona"]["description"]),
                             "persona.description", "persona"))
            elif key in ("description", "personality", "scenario"):
                value = card.get(key) or ""
                if key == "scenario" and chat_settings.get("scenario"):
                    value = chat_settings["scenario"]
                text = expand(value)
                raw = text
                if key != "description" and chat_mode:
                    # chat completion wraps them in `personality_format` / `scenario_format`
                    fmt = setting(params, f"{key}_format")
                    text = expand(fmt) if value and fmt else ""
                el = _el(f"card.{key}", "system", text, f"card.{key}", "card")
                el.meta["raw"] = raw
                p.append(el)
            elif key == "examples":
                header = expand(setting(params, "new_example_chat_prompt"))
                user, char = tour.data["persona"]["name"], card.get("name") or "Assistant"
                for i, block in enumerate(split_examples(card.get("mes_example") or "")):
                    # later blocks go first when the budget is short (SillyTavern adds them
                    # in order while they fit)
                    text = expand(block)
                    group = example_elements(f"examples:{i}", text, header=header, user=user,
                                             char=char, source="card.mes_example", priority=-i)
                    if not group:  # no speaker lines: the block as written, one element
                        group = [_el(f"examples:{i}", "system", text, "card.mes_example",
                                     "examples", priority=-i)]
                        group[0].meta["block"] = text
                    for el in group:
                        p.append(el)
            elif key == "history":
                await self._history(core, tour)
                self._new_chat(tour, expand(setting(params, "new_chat_prompt"))
                               if chat_mode else "")
                if tour.mode == "continue" and nudge:
                    text = with_last_chat_message(setting(params, "continue_nudge_prompt"),
                                                  tour.data.get("continue_text", ""))
                    p.append(_el("continue_nudge", "system", expand(text),
                                 "connection.continue_nudge_prompt", "other"))
            elif key == "post_history" and post.strip():
                # none at all when there are no instructions: the input stays last
                p.append(_el("post_history", "system", expand(post),
                             "card.post_history_instructions", "post_history", protected=True))
            elif key in ("wi_before", "wi_after"):
                tour.data.setdefault("anchors", []).append(key)
        self._authors_note(tour)
        self._character_note(tour)
        self._client_system(tour)

    def _new_chat(self, tour: Tour, text: str) -> None:
        """SillyTavern's new-chat line (`[Start a new Chat]`) at the start of the history."""
        if not text.strip():
            return
        el = _el("new_chat", "system", text, "connection.new_chat_prompt", "other")
        first = next((i for i, e in enumerate(tour.prompt) if e.kind in ("history", "input")),
                     None)
        if first is None:
            tour.prompt.append(el)
        else:
            tour.prompt.insert(first, el)

    def _character_note(self, tour: Tour) -> None:
        """The card's Character's Note, in the chat at its depth with its role (SillyTavern's
        `DEPTH_PROMPT` extension prompt), every turn."""
        text, depth, role = character_note(tour.data["character"])
        text = tour.data["expand"](text).strip() if text.strip() else ""
        if not text or "history" not in _order_of(tour):
            return
        el = _el("character_note", role, text, "card.extensions.depth_prompt", "card")
        insert_injection(tour.prompt, el, depth, key=KEY_CHARACTER_NOTE)

    def _client_system(self, tour: Tour) -> None:
        """A channel's client system texts (the facade's system/developer messages), as
        sent: right after the main prompt, protected, never stored as chat messages."""
        anchor = "main" if "main" in tour.prompt else None
        for i, text in enumerate(tour.data.get("client_system") or ()):
            el = _el(f"client_system:{i}", "system", text, "client.system", "system",
                     protected=True)
            if anchor is None:
                tour.prompt.insert(i, el)
            else:
                tour.prompt.insert_after(anchor, el)
            anchor = el.id

    async def _history(self, core: Core, tour: Tour) -> None:
        batch: list[HistoryMessage] = list(tour.data["history_batch"])
        complete = tour.data["history_complete"]
        conn = tour.data["connection"]
        budget_chars = conn["context_size"] * _CHARS_PER_TOKEN_CEILING
        target = tour.data.get("target_message_id")
        skip = target if tour.mode in ("swipe", "regenerate") or (
            tour.mode == "continue" and not tour.data.get("continue_nudge")) else None
        newest_first: list[HistoryMessage] = []
        total = 0.0
        while True:
            for m in batch:
                if m.hidden or m.id == skip:
                    continue
                if m.unfinished:
                    # a stopped or failed answer is not the model's finished word: only the
                    # tool calls it made are replayed (with their results, R5.4)
                    if not m.steps:
                        continue
                    m = replace(m, content="")
                newest_first.append(m)
                total += len(m.content)
                if m.steps:
                    total += sum(len(str(s)) for s in m.steps)
            if complete or total > budget_chars or not batch:
                break
            async with reads(core, tour) as s:  # the read session stage 2 began
                batch = await chat_store.history_newest_first(
                    s, tour.chat_id, before=batch[-1].position, limit=500
                )
            complete = len(batch) < 500
        tour.data["history_reached_start"] = complete and total <= budget_chars
        tour.data["history_loaded"] = len(newest_first)
        if tour.mode == "continue" and target:
            tour.data["continue_text"] = next(
                (m.content for m in batch if m.id == target), ""
            ) or await self._content_of(core, tour, target)
        expand = tour.data["expand"]
        user_message_id = tour.data.get("user_message_id")
        max_chars = core.settings.context.tool_result_max_chars
        elements: list[Element] = []
        for m in reversed(newest_first):
            if m.role != "user":
                elements.extend(history_elements(m, max_chars=max_chars))
                continue
            for el in history_elements(m, max_chars=max_chars):
                if m.id == user_message_id:
                    el.kind, el.protected = "input", True
                    el.content = _with_text(el.content, tour.data["input_expanded"])
                elif not m.resolved:
                    el.content = _with_text(el.content, expand(el.text))
                elements.append(el)
        tour.prompt.extend(elements)

    async def _content_of(self, core: Core, tour: Tour, message_id: str) -> str:
        async with reads(core, tour) as s:
            batch = await chat_store.history_newest_first(s, tour.chat_id, limit=1)
        return batch[0].content if batch and batch[0].id == message_id else ""

    def _authors_note(self, tour: Tour) -> None:
        note = tour.data["chat"]["settings"].get("authors_note") or {}
        text = (note.get("text") or "").strip()
        interval = int(note.get("interval") or 1)
        if not text or (interval > 1 and (tour.data["chat"]["turn"] + 1) % interval):
            return
        el = _el("authors_note", note.get("role") or "system", tour.data["expand"](text),
                 "chat.authors_note", "authors_note")
        position = note.get("position") or "in_chat"
        # SillyTavern's "before / after the main prompt" (imported as top / bottom)
        if position == "top" and "main" in tour.prompt:
            tour.prompt.insert_before("main", el)
        elif position == "bottom" and "main" in tour.prompt:
            tour.prompt.insert_after("main", el)
        else:
            insert_injection(tour.prompt, el, int(note.get("depth", 4)), key=KEY_AUTHORS_NOTE)


def prompt_defaults(tour: Tour) -> tuple[str, str]:
    """The default main prompt and post-history instructions (a card's own still win): the
    chat's, else the connection's params, else its system-prompt preset's (SillyTavern's
    `sysprompt` `content` / `post_history`), else SillyTavern's default main prompt."""
    settings, params = tour.data["chat"]["settings"], tour.data["connection"]["params"]
    preset = tour.data.get("sysprompt")
    main = settings.get("system_prompt") or params.get("system_prompt") or (
        preset.content if preset is not None else "") or DEFAULT_MAIN
    post = settings.get("post_history") or params.get("post_history") or (
        preset.post_history if preset is not None else "") or ""
    return main, post


def character_note(card: dict[str, Any]) -> tuple[str, int, str]:
    """The card's Character's Note (`extensions.depth_prompt`): text, depth (4 when not a
    whole number from 0) and role (`system` unless `user` or `assistant`)."""
    ext = card.get("extensions") if isinstance(card.get("extensions"), dict) else {}
    note = ext.get("depth_prompt") if isinstance(ext.get("depth_prompt"), dict) else {}
    text = note.get("prompt") if isinstance(note.get("prompt"), str) else ""
    depth = note.get("depth", 4)
    if isinstance(depth, str) and depth.strip().isdigit():
        depth = int(depth)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        depth = 4
    role = note.get("role") if note.get("role") in ("system", "user", "assistant") else "system"
    return text, depth, role


def history_elements(m: HistoryMessage, *, max_chars: int = DEFAULT_MAX_CHARS) -> list[Element]:
    """A stored message as prompt elements: tool steps replayed, grouped so they leave together.

    A stored tool result enters the prompt as R5.3 says (`(empty)` for "", cut to
    `max_chars` with a note); a call the tour never answered (it was aborted mid-step) gets
    an `error:` result, so every replayed call is followed by its result as providers require.
    """
    # A stored message's own element is made with `Element`'s fields in their order (id,
    # role, content, source, kind, protected, tokens, priority, group, name, tool_calls,
    # tool_call_id, meta): by keyword it cost twice as much, for hundreds every tour
    group, key = f"msg:{m.id}", f"history:{m.id}"
    if m.role != "assistant":
        content: Any = m.content
        if m.images:
            # a stored entry of another shape than domain/images.py accepts is skipped
            parts = [p for p in (image_part(img) for img in m.images) if p is not None]
            if parts:
                content = [{"type": "text", "text": m.content}, *parts]
        role = "user" if m.role == "user" else "system"
        return [Element(key, role, content, key, "history", False, None, 0, group, None,
                        None, None, {"position": m.position, "speaker": m.name})]
    out: list[Element] = []
    for i, step in enumerate(m.steps):
        calls = step.get("tool_calls") or []
        if not calls:
            continue
        out.append(Element(
            id=f"{key}:step{i}", role="assistant", content=step.get("text") or "",
            source=key, kind="history", group=group,
            tool_calls=[{"id": c["id"], "type": "function",
                         "function": {"name": c["name"], "arguments": c.get("arguments", "")}}
                        for c in calls],
            meta={"position": m.position},
        ))
        results = {r.get("id"): r for r in step.get("results") or []}
        for c in calls:
            stored = results.get(c["id"])
            content = (prompt_result(str(stored.get("content") or ""), max_chars=max_chars)
                       if stored is not None else UNANSWERED)
            out.append(Element(
                id=f"{key}:result:{c['id']}", role="tool",
                content=content, source=key, kind="history",
                group=group, tool_call_id=c["id"], meta={"position": m.position, "tool": True},
            ))
    if m.content or not out:
        out.append(Element(key, "assistant", m.content, key, "history", False, None, 0, group,
                           None, None, None, {"position": m.position, "speaker": m.name}))
    return out


def _order_of(tour: Tour) -> Any:
    settings, params = tour.data["chat"]["settings"], tour.data["connection"]["params"]
    return settings.get("prompt_order") or params.get("prompt_order") or DEFAULT_ORDER


def _with_text(content: Any, text: str) -> Any:
    if isinstance(content, str):
        return text
    parts = [dict(p) for p in content]
    for part in parts:
        if part.get("type") == "text":
            part["text"] = text
            break
    return parts


def _el(id: str, role: str, content: str, source: str, kind: str, *, protected: bool = False,
        priority: int = 0) -> Element:
    return Element(id=id, role=role, content=content, source=source, kind=kind,
                   protected=protected, priority=priority)


def heuristic_tokens(text: str) -> int:
    return math.ceil(len(text) / 3.35)
