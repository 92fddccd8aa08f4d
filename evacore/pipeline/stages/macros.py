"""Stage 2, macros: build the macro environment for this tour and resolve macros in the input.

Must not: evaluate macros any other way; every later stage expands text through
`tour.data["expand"]`, this same engine and environment (R2.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evacore.domain.ids import utcnow
from evacore.errors import EvacoreError
from evacore.macros import MacroEnv
from evacore.pipeline.reads import reads
from evacore.pipeline.stages.character import (
    TEXT_KINDS,
    character_note,
    prompt_defaults,
    split_examples,
)
from evacore.store import chats as chat_store
from evacore.store.settings import get_setting

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

HISTORY_BATCH = 200


class Macros:
    number = 2
    name = "macros"

    async def run(self, core: Core, tour: Tour) -> None:
        # a message being swiped or regenerated is not part of the chat macros read
        leaving = tour.data.get("target_message_id") if tour.mode in ("swipe", "regenerate") \
            else None
        async with reads(core, tour) as s:
            batch = await chat_store.history_newest_first(s, tour.chat_id, limit=HISTORY_BATCH)
            global_vars = dict((await get_setting(s, "global_variables")) or {})
            shown = [m for m in batch if not m.hidden]
            swipes = await _swipe_ids(s, tour, shown[0] if shown else None, leaving)
        tour.data["history_batch"] = batch
        tour.data["history_complete"] = len(batch) < HISTORY_BATCH
        card: dict[str, Any] = tour.data["character"]
        persona = tour.data["persona"]
        chat = tour.data["chat"]
        conn = tour.data["connection"]
        visible = [m for m in shown if m.id != leaving]
        last_user = next((m for m in visible if m.role == "user"), None)
        last_char = next((m for m in visible if m.role == "assistant"), None)
        if conn["kind"] in TEXT_KINDS:
            from evacore.pipeline.stages.instruct import load_sysprompt

            # SillyTavern's system-prompt presets belong to text completion (instruct mode)
            tour.data["sysprompt"] = await load_sysprompt(core, conn)
        default_main = prompt_defaults(tour)[0]
        instruct = await _instruct_values(core, conn)
        env = MacroEnv(
            user=persona["name"],
            char=card.get("name") or "Assistant",
            description=card.get("description") or "",
            personality=card.get("personality") or "",
            scenario=(chat["settings"].get("scenario") or card.get("scenario") or ""),
            persona=persona["description"] or "",
            mes_examples_raw=card.get("mes_example") or "",
            mes_examples=examples_text(card.get("mes_example") or ""),
            system_prompt=card.get("system_prompt") or default_main,
            default_system_prompt=default_main,
            # the card's own prompt and instructions always win here (SillyTavern's
            # "prefer character prompt / instructions" on)
            char_prompt=card.get("system_prompt") or "",
            char_instruction=card.get("post_history_instructions") or "",
            char_version=str(card.get("character_version") or ""),
            char_depth_prompt=character_note(card)[0],
            creator_notes=card.get("creator_notes") or "",
            greetings=[card.get("first_mes") or "", *(card.get("alternate_greetings") or [])],
            model=conn.get("model") or "",
            chat_id=tour.chat_id,
            last_message=visible[0].content if visible else "",
            last_user_message=last_user.content if last_user else "",
            last_char_message=last_char.content if last_char else "",
            last_message_id=visible[0].position if visible else None,
            first_included_message_id=chat.get("state", {}).get("first_included_message_id"),
            last_swipe_id=swipes[0],
            current_swipe_id=swipes[1],
            instruct=instruct,
            input=tour.input_text,
            idle_since=_idle_since(visible),
            max_context=conn["context_size"],
            max_response=conn["max_tokens"],
            max_prompt=conn["context_size"] - conn["max_tokens"],
            generation_type=tour.mode,
            local_vars=chat["variables"],
            global_vars=global_vars,
            now=utcnow().astimezone(),
            rng=tour.rng,
        )
        engine = core.macros
        tour.data["macro_env"] = env
        tour.data["global_vars_before"] = dict(global_vars)
        tour.data["expand"] = lambda text: engine.evaluate(text, env) if text else text
        tour.data["input_expanded"] = tour.data["expand"](tour.input_text)
        message_id = tour.data.get("user_message_id")
        if message_id and tour.data["input_expanded"] != tour.input_text:
            # Stored as resolved (as SillyTavern stores a sent message): a later tour must not
            # run its `{{setvar}}`/`{{incvar}}`/`{{random}}` again when it replays history.
            async with core.session() as s:
                await chat_store.store_resolved_text(s, message_id, tour.data["input_expanded"])


def examples_text(raw: str) -> str:
    """`{{mesExamples}}`: the card's example blocks, each headed `<START>` (the
    chat-completion form; a macro inside is expanded when inserted)."""
    return "".join(f"<START>\n{block}\n" for block in split_examples(raw))


async def _swipe_ids(s: Any, tour: Tour, last: Any, leaving: str | None
                     ) -> tuple[int | None, int | None]:
    """`{{lastSwipeId}}` (the last message's variant count) and `{{currentSwipeId}}` (the
    1-based active one); a swipe being made counts as the next, pending variant."""
    if last is None:
        return None, None
    if last.variant_id is None and not (tour.mode == "swipe" and last.id == leaving):
        return 1, 1  # a message without variants (the user's) is its own one swipe
    ids = await chat_store.variant_ids(s, last.id)
    count = len(ids) or 1
    if tour.mode == "swipe" and last.id == leaving:
        return count, count + 1
    current = ids.index(last.variant_id) + 1 if last.variant_id in ids else count
    return count, current


async def _instruct_values(core: Core, conn: dict[str, Any]) -> dict[str, str]:
    """The instruct and context template fields the template macros read, for a text-mode
    connection (empty in chat mode, as SillyTavern's are with instruct off)."""
    if conn["kind"] not in TEXT_KINDS:
        return {}
    from evacore.pipeline.stages.instruct import resolve_templates

    try:
        instruct, context = await resolve_templates(core, conn)
    except EvacoreError:
        return {}  # stage 9 reports an unknown preset
    out = {k: v for k, v in instruct.model_dump().items() if isinstance(v, str)}
    out.update(chat_start=context.chat_start, example_separator=context.example_separator)
    return out


def _idle_since(visible: list[Any]) -> Any:
    """The send time of the newest user message before the current one (idle duration)."""
    users = [m for m in visible if m.role == "user"]
    if len(users) >= 2:
        return users[1].created_at
    return None
