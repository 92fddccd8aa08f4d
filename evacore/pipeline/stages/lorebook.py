"""Stage 4, lorebook: insert activated World Info entries (R2.4).

Must not: implement matching (lore/ does); this stage gathers books, calls the engine and
places each activation in the prompt. A broken book or a failing scan is logged and
recorded in `diagnostics["lore"]`; it never fails the tour.
Outlets (`{{outlet::name}}`) reach text expanded after this stage; the author's note and
post-history instructions, expanded earlier, are expanded again when they use an outlet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from evacore.errors import Aborted
from evacore.logs import get_logger
from evacore.lore import CharacterInfo, Position, ScanMessage, TimedState, place, scan
from evacore.lore.records import Activation
from evacore.pipeline.chat_shape import KEY_LORE, example_elements, insert_injection, setting
from evacore.pipeline.reads import reads
from evacore.pipeline.stages.character import (
    DEFAULT_ORDER,
    IMPERSONATE_PROMPT,
    character_note,
    prompt_defaults,
    with_original,
)
from evacore.pipeline.stages.token_count import count_text
from evacore.prompt.elements import Element, Prompt
from evacore.services.lore import chat_length, effective_settings, global_world_info

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)

STATE_KEY = "lore"
_OUTLET = re.compile(r"\{\{\s*outlet\s*::", re.IGNORECASE)
# Which prompt elements stand for each prompt-order key (stage 3's ids).
_ORDER_IDS: dict[str, Callable[[Element], bool]] = {
    "main": lambda el: el.id == "main",
    "persona": lambda el: el.id == "persona",
    "description": lambda el: el.id == "card.description",
    "personality": lambda el: el.id == "card.personality",
    "scenario": lambda el: el.id == "card.scenario",
    "examples": lambda el: el.id.startswith("examples:"),
    "history": lambda el: el.kind in ("history", "input"),
    "post_history": lambda el: el.id == "post_history",
}


class Lorebook:
    number = 4
    name = "lorebook"

    async def run(self, core: Core, tour: Tour) -> None:
        diag: dict[str, Any] = {"seed": tour.seed, "activated": [], "cut": []}
        tour.diagnostics["lore"] = diag
        try:
            await self._run(core, tour, diag)
        except Aborted:
            raise
        except Exception as exc:
            log.exception("lore.failed", error_type=type(exc).__name__)
            diag["error"] = f"{type(exc).__name__}: {exc}"

    async def _run(self, core: Core, tour: Tour, diag: dict[str, Any]) -> None:
        chat = tour.data["chat"]
        leave_out = tour.data.get("target_message_id") if tour.mode in ("swipe", "regenerate") else None
        async with reads(core, tour) as s:
            books = await core.lore.books_for(
                s, chat_id=tour.chat_id, character_id=tour.data.get("character_id"),
                persona_id=tour.data["persona"].get("id"),
            )
            if not books.books:
                diag.update(books=[], problems=books.problems)
                return
            global_values = await global_world_info(s)
            turn = await chat_length(s, tour.chat_id, leave_out=leave_out)
        settings, warnings = effective_settings(global_values, chat["settings"])
        conn = tour.data["connection"]
        state = chat.setdefault("state", {})
        result = scan(
            books.sourced(), _chat_messages(tour, leave_out), settings,
            TimedState.from_json(state.get(STATE_KEY)),
            seed=tour.seed, turn=turn, generation_type=tour.mode,
            max_context=max(1, int(conn["context_size"]) - int(conn["max_tokens"])),
            count_tokens=lambda text: count_text(core, tour, text),
            character=_character(tour), persona_description=tour.data["persona"]["description"] or "",
            extra_haystack=_extra_haystack(tour), macros=tour.data["expand"],
        )
        state[STATE_KEY] = result.timed_state.to_json()
        ids = books.ids_by_name()
        placed, not_placed = _Placer(tour, ids).place(result.activated)
        diag.update(result.diagnostics)
        diag.update(
            book_ids=ids, settings=settings.to_dict(), placed=placed, not_placed=not_placed,
            problems=books.problems, books_loaded=books.loaded,
        )
        if warnings:
            diag["warnings"] = list(diag.get("warnings") or []) + warnings
        outlets = place(result.activated).outlets
        if outlets:
            diag["outlets"] = sorted(outlets)
            _refresh_outlets(tour, outlets)


def _chat_messages(tour: Tour, leave_out: str | None) -> list[ScanMessage]:
    """The history as the scan reads it, oldest first; the message being answered is last."""
    persona = tour.data["persona"]["name"]
    char = tour.data["character"].get("name") or "Assistant"
    current = tour.data.get("user_message_id")
    out = []
    for m in reversed(tour.data.get("history_batch") or []):
        if m.hidden or m.id == leave_out:
            continue
        text = tour.data.get("input_expanded", m.content) if m.id == current else m.content
        is_user = m.role == "user"
        out.append(ScanMessage(name=m.name or (persona if is_user else char), text=text or "",
                               is_user=is_user))
    return out


def _character(tour: Tour) -> CharacterInfo:
    card: dict[str, Any] = tour.data["character"]
    ext = card.get("extensions") if isinstance(card.get("extensions"), dict) else {}
    depth_prompt = ext.get("depth_prompt") if isinstance(ext.get("depth_prompt"), dict) else {}
    tags = card.get("tags") if isinstance(card.get("tags"), list) else []
    scenario = tour.data["chat"]["settings"].get("scenario") or card.get("scenario") or ""
    return CharacterInfo(
        name=card.get("name") or "Assistant", tags=tuple(str(t) for t in tags),
        description=str(card.get("description") or ""),
        personality=str(card.get("personality") or ""),
        depth_prompt=str(depth_prompt.get("prompt") or ""), scenario=str(scenario),
        creator_notes=str(card.get("creator_notes") or ""),
    )


def _extra_haystack(tour: Tour) -> dict[str, str]:
    """The author's note (and the Character's Note) join the scan when the note's `scan` flag
    is on (SillyTavern's option)."""
    note = tour.data["chat"]["settings"].get("authors_note") or {}
    out: dict[str, str] = {}
    if isinstance(note, dict) and note.get("scan"):
        if isinstance(note.get("text"), str):
            out["author's note"] = tour.data["expand"](note["text"])
        # SillyTavern's Character's Note follows the author's note's scan switch
        text = character_note(tour.data["character"])[0]
        if text.strip():
            out["character's note"] = tour.data["expand"](text)
    return out


class _Placer:
    """Puts each activation in the prompt as its own element `lore:<book id>:<uid>`."""

    def __init__(self, tour: Tour, ids: dict[str, str]) -> None:
        self.tour = tour
        self.prompt: Prompt = tour.prompt
        self.ids = ids
        settings = tour.data["chat"]["settings"]
        params = tour.data["connection"]["params"]
        self.order = list(settings.get("prompt_order") or params.get("prompt_order") or DEFAULT_ORDER)
        self.placed: list[dict[str, Any]] = []
        self.not_placed: list[dict[str, Any]] = []

    def place(self, activations: list[Activation]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        by_pos: dict[Position | int, list[Activation]] = {}
        for act in activations:
            by_pos.setdefault(act.position, []).append(act)
        for pos, key in ((Position.BEFORE_CHAR, "wi_before"), (Position.AFTER_CHAR, "wi_after")):
            # one message per slot when sent (SillyTavern joins them with `\n`)
            self._at(self._slot(key), by_pos.get(pos, []), "system", "lore", join=key)
        self._authors_note(by_pos.get(Position.AN_TOP, []), by_pos.get(Position.AN_BOTTOM, []))
        self._examples(by_pos.get(Position.EM_TOP, []), by_pos.get(Position.EM_BOTTOM, []))
        for insert in place(by_pos.get(Position.AT_DEPTH, [])).at_depth:
            for act in insert.activations:
                el = self._element(act, insert.role.value, "lore")
                insert_injection(self.prompt, el, insert.depth, key=KEY_LORE)
                self._record(el, act, depth=insert.depth)
        for pos, acts in by_pos.items():
            if not isinstance(pos, Position):
                self._skip(acts, f"unknown position {pos}")
        return self.placed, self.not_placed

    # -- destinations ----------------------------------------------------------------------

    def _slot(self, key: str) -> int:
        """Where a prompt-order marker (`wi_before`, `wi_after`, `examples`) sits: before the
        next element present in the order, else after the previous one."""
        if key in self.order:
            i = self.order.index(key)
            for nxt in self.order[i + 1:]:
                found = self._indexes(nxt)
                if found:
                    return found[0]
            for prev in reversed(self.order[:i]):
                found = self._indexes(prev)
                if found:
                    return found[-1] + 1
        anchor = "card.description" if key == "wi_before" else "card.scenario"
        if anchor in self.prompt:
            return self.prompt.index(anchor) + (key != "wi_before")
        return self.prompt.index("main") + 1 if "main" in self.prompt else 0

    def _indexes(self, key: str) -> list[int]:
        test = _ORDER_IDS.get(key)
        if test is None:
            return []
        return [i for i, el in enumerate(self.prompt) if test(el)]

    def _at(self, index: int, acts: Iterable[Activation], role: str, kind: str, *,
            join: str | None = None) -> int:
        for act in acts:
            el = self._element(act, role, kind)
            if join is not None:
                el.meta["join"] = join
            self.prompt.insert(index, el)
            self._record(el, act)
            index += 1
        return index

    def _example_blocks(self, index: int, acts: Iterable[Activation]) -> int:
        """Example entries become example blocks like the card's (header and named turns);
        in text mode the header's raw block is used."""
        tour = self.tour
        header = tour.data["expand"](setting(tour.data["connection"]["params"],
                                             "new_example_chat_prompt"))
        user = tour.data["persona"]["name"]
        char = tour.data["character"].get("name") or "Assistant"
        for act in acts:
            base = self._element(act, "system", "examples")
            group = example_elements(base.id, act.content, header=header, user=user,
                                     char=char, source=base.source, priority=base.priority,
                                     meta=base.meta)
            if not group:  # no turns: the raw text stays one block (text mode reads it)
                base.meta["block"] = act.content
                group = [base]
            for el in group:
                el.protected = base.protected
                self.prompt.insert(index, el)
                index += 1
            self._record(group[0], act)
        return index

    def _authors_note(self, top: list[Activation], bottom: list[Activation]) -> None:
        note = self.prompt.get("authors_note")
        if note is None:
            self._skip(top + bottom, "no author's note in this prompt")
            return
        # SillyTavern sends top + note + bottom as one message (joined by `\n`)
        join = note.meta.setdefault("join", "authors_note")
        first = self._at(self.prompt.index("authors_note"), top, note.role, "lore", join=join)
        self._at(self.prompt.index("authors_note") + 1, bottom, note.role, "lore", join=join)
        if "inject" in note.meta:
            for el in self.prompt.elements[first - len(top):self.prompt.index("authors_note")
                                           + len(bottom) + 1]:
                el.meta["inject"] = note.meta["inject"]

    def _examples(self, top: list[Activation], bottom: list[Activation]) -> None:
        if not top and not bottom:
            return
        found = self._indexes("examples")
        start = found[0] if found else self._slot("examples")
        end = self._example_blocks(start, top)
        found = self._indexes("examples")
        self._example_blocks(found[-1] + 1 if found else end, bottom)

    # -- elements --------------------------------------------------------------------------

    def _element(self, act: Activation, role: str, kind: str) -> Element:
        book_id = self.ids.get(act.book_name, act.book_name)
        el_id = base = f"lore:{book_id}:{act.uid}"
        n = 1
        while el_id in self.prompt:
            n += 1
            el_id = f"{base}#{n}"
        position = act.position.value if isinstance(act.position, Position) else str(act.position)
        return Element(
            id=el_id, role=role, content=act.content, source=f"lore:{book_id}:{act.uid}",
            kind=kind, protected=act.mandatory, priority=_priority(act.order),
            meta={"position": position, "book": act.book_name, "book_id": book_id,
                  "uid": act.uid, "comment": act.entry.comment, "order": act.order,
                  "source": act.source},
        )

    def _record(self, el: Element, act: Activation, **extra: Any) -> None:
        self.placed.append({"id": el.id, "position": el.meta["position"], "role": el.role,
                            "mandatory": act.mandatory, **extra})

    def _skip(self, acts: Iterable[Activation], reason: str) -> None:
        for act in acts:
            self.not_placed.append({"book": act.book_name, "uid": act.uid, "reason": reason})


def _priority(order: float) -> int:
    try:
        return int(order)
    except (OverflowError, ValueError):
        return 0


def _templates(tour: Tour) -> dict[str, str]:
    """The unexpanded text of elements stage 3 expanded that may use an outlet."""
    chat_settings = tour.data["chat"]["settings"]
    params = tour.data["connection"]["params"]
    card = tour.data["character"]
    out: dict[str, str] = {}
    note = chat_settings.get("authors_note") or {}
    if isinstance(note, dict) and isinstance(note.get("text"), str):
        out["authors_note"] = note["text"].strip()
    default_post = prompt_defaults(tour)[1]
    post = card.get("post_history_instructions") or ""
    post = with_original(post, default_post) if post else default_post
    if tour.mode == "impersonate":
        post = (post + "\n" if post else "") + (params.get("impersonate_prompt") or IMPERSONATE_PROMPT)
    out["post_history"] = post
    for el in tour.prompt:
        template = el.meta.get("template")
        if isinstance(template, str):
            out[el.id] = template
    return out


def _refresh_outlets(tour: Tour, outlets: dict[str, str]) -> None:
    env = tour.data.get("macro_env")
    if env is None:
        return
    env.outlets = {**env.outlets, **outlets}
    expand = tour.data["expand"]
    for el_id, raw in _templates(tour).items():
        if raw and _OUTLET.search(raw) and el_id in tour.prompt:
            tour.prompt.set_content(el_id, expand(raw))
