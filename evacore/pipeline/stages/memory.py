"""Stage 5, memory/RAG: insert the chat's memory blocks and the retrieval results (R2.5).

Must not: implement search or ranking (memory/ does); this stage calls it and places results:
blocks at their configured position (default right after the card), retrieval results after
the history (before the final input), never in the system area, so the cached prefix holds.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from evacore.errors import Aborted
from evacore.logs import get_logger
from evacore.memory.blocks import BlockView, ChatScopes, block_views_for_chat, render_block
from evacore.memory.index import any_chunk, catch_up, chat_keys
from evacore.memory.options import INSTANCE_KEY, RetrievalOptions, merge_lenient
from evacore.memory.ranking import Candidate, pack
from evacore.memory.retrieve import Query, search
from evacore.pipeline.reads import end_reads, reads
from evacore.pipeline.stages.token_count import MESSAGE_OVERHEAD, count_text, text_counter
from evacore.prompt.elements import Element
from evacore.store.recall import recall
from evacore.store.settings import get_setting

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.memory.service import MemoryService
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)
_AFTER_CARD = ("card.scenario", "card.personality", "card.description", "persona", "main")
_BEFORE_CARD = ("card.description", "card.personality", "card.scenario")
_FIELD = re.compile(r"\{(name|text)\}")


class Memory:
    number = 5
    name = "memory"

    async def run(self, core: Core, tour: Tour) -> None:
        service: MemoryService | None = core.memory
        if service is None:
            return
        chat = tour.data["chat"]
        scopes = ChatScopes(tour.chat_id, chat.get("character_id"), chat.get("user_id"))
        async with reads(core, tour) as s:
            blocks = await recall(s, "memory_blocks", tuple(scopes.pairs()),
                                  lambda: block_views_for_chat(s, scopes))
            instance = await get_setting(s, INSTANCE_KEY)
        options, warning = merge_lenient(instance, (chat.get("settings") or {}).get("retrieval"))
        tour.data["retrieval_options"] = options
        diag = tour.diagnostics.setdefault("memory", {})
        diag["blocks"] = insert_blocks(tour, blocks)
        if not options.enabled:
            diag["retrieval"] = {"enabled": False}
            await _index_later(service, tour)
            return
        report: dict[str, Any] = {"enabled": True}
        if warning:
            report["warning"] = warning
        diag["retrieval"] = report
        try:
            await _retrieve(core, service, tour, options, report)
        except Aborted:
            raise
        except Exception as exc:  # noqa: BLE001 - retrieval adds to a prompt; it never sinks a tour
            log.warning("memory.retrieval_failed", error=f"{type(exc).__name__}: {exc}")
            report["error"] = f"{type(exc).__name__}: {exc}"


def insert_blocks(tour: Tour, blocks: list[BlockView]) -> list[dict[str, Any]]:
    """Place each block at its position; blocks sharing a position keep their order."""
    expand = tour.data.get("expand") or (lambda text: text)
    last_at: dict[str, str] = {}
    out = []
    for block in blocks:
        el = Element(
            id=f"memory:{block.id}", role=block.role or "system",
            content=render_block(block, expand(block.content)),
            source=f"memory:{block.scope_kind}:{block.scope_id}", kind="memory",
            protected=bool(block.mandatory),
            meta={"label": block.label, "scope": block.scope_kind},
        )
        _place_block(tour, el, block.position or "after_char", last_at)
        out.append({"id": block.id, "label": block.label, "scope": block.scope_kind,
                    "position": block.position, "chars": len(block.content),
                    "mandatory": block.mandatory})
    return out


def _place_block(tour: Tour, el: Element, position: str, last_at: dict[str, str]) -> None:
    p = tour.prompt
    if position in last_at:
        p.insert_after(last_at[position], el)
    elif position.startswith("depth:"):
        p.insert_at_depth(int(position[6:]), el)
    elif position == "top" and "main" in p:
        p.insert_after("main", el)
    elif position == "top":
        p.insert(0, el)
    elif position == "before_char" and (anchor := _first(tour, _BEFORE_CARD)):
        p.insert_before(anchor, el)
    elif anchor := _first(tour, _AFTER_CARD):
        p.insert_after(anchor, el)
    else:
        first_chat = next((i for i, e in enumerate(p) if e.kind in ("history", "input")), None)
        p.insert(first_chat if first_chat is not None else len(p), el)
    if not position.startswith("depth:"):
        last_at[position] = el.id


def _first(tour: Tour, ids: tuple[str, ...]) -> str | None:
    return next((i for i in ids if i in tour.prompt), None)


def _tokens(core: Core, tour: Tour, text: str) -> int:
    return count_text(core, tour, text) + MESSAGE_OVERHEAD


def _chat_messages(tour: Tour) -> list[Element]:
    """The prompt's message elements (one per stored message), oldest first."""
    return [el for el in tour.prompt
            if el.kind in ("history", "input") and el.id == el.source and el.role != "tool"]


class _Window(NamedTuple):
    """What retrieval needs to know of the prompt's messages, read in one pass over it."""

    messages: list[Element]
    """The message elements (one per stored message), oldest first (`_chat_messages`)."""
    stored: list[str]
    """The ids of the stored messages among them (history, not the input), oldest first."""
    inputs: list[str]
    """The ids of the input messages among them."""
    kept: set[str]
    """Message ids expected to stay in the prompt after context shifting: the newest whole
    messages that fit the budget next to everything else (those are never retrieved)."""


def _window(core: Core, tour: Tour, reserve: int) -> _Window:
    """The prompt's messages and those that stay in it (`_Window`): a long chat's every
    element is looked at once here, its text counted once (stage 6 reuses the count)."""
    conn = tour.data["connection"]
    budget = int(conn["context_size"]) - int(conn["max_tokens"])
    count = text_counter(core, tour)
    others = 0
    groups: dict[str, int] = {}  # a message's elements together, oldest message first
    messages: list[Element] = []
    stored: list[str] = []
    inputs: list[str] = []
    for el in tour.prompt:
        size = el.tokens
        if size is None:
            content = el.content
            size = count(content if type(content) is str else el.text) + MESSAGE_OVERHEAD
        kind = el.kind
        if kind == "history":
            key = el.source.removeprefix("history:")
            groups[key] = groups.get(key, 0) + size
            if el.id == el.source and el.role != "tool":
                messages.append(el)
                stored.append(key)
            continue
        others += size
        if kind == "input" and el.id == el.source and el.role != "tool":
            messages.append(el)
            inputs.append(el.source.removeprefix("history:"))
    room = budget - reserve - 3 - others
    kept: set[str] = set()
    for key in reversed(groups):
        if groups[key] > room:
            break
        room -= groups[key]
        kept.add(key)
    return _Window(messages, stored, inputs, kept)


async def _retrieve(core: Core, service: MemoryService, tour: Tour, opts: RetrievalOptions,
                    report: dict[str, Any]) -> None:
    chat = tour.data["chat"]
    conn = tour.data["connection"]
    budget = int(conn["context_size"]) - int(conn["max_tokens"])
    reserve = opts.max_tokens if opts.max_tokens is not None else int(budget * opts.budget_share)
    window = _window(core, tour, reserve)
    messages, exclude = window.messages, window.kept
    texts = [el.text for el in reversed(messages[-opts.query_messages:])]  # newest first
    exclude.update(i for i in (tour.data.get("user_message_id"),
                               tour.data.get("target_message_id")) if i)
    state = chat.setdefault("state", {}).setdefault("retrieval", {})
    every_message_kept = bool(tour.data.get("history_reached_start")) and \
        exclude.issuperset(window.stored)
    if every_message_kept:
        async with reads(core, tour) as s:
            documents = await _any_documents(s, tour, opts)
        if not documents:
            # Nothing has left the window and there is no document to search: no work to do.
            kept = len(window.stored) + sum(1 for key in window.inputs if key in exclude)
            report.update(skipped="every message is in the prompt and no document is in scope",
                          query="\n".join(reversed(texts)), budget=reserve, inserted=[], cut=[],
                          excluded_in_window=kept)
            await _index_later(service, tour, messages)
            return
    await end_reads(tour)  # the search may wait on the embedder: the connection goes back
    async with core.session() as s:
        report["backfilled"] = await catch_up(s, tour.chat_id, state, opts)
        found = await search(service, s, Query(
            keys=chat_keys(tour.chat_id, chat.get("character_id"), messages=opts.messages,
                           documents=opts.documents),
            texts=texts, options=opts, chat_id=tour.chat_id, exclude_message_ids=exclude,
            newest_position=max((int(el.meta.get("position", 0)) for el in messages),
                                default=0),
        ))
    service.kick()
    packed = pack(found.ranked, min_score=opts.min_score, top_k=opts.top_k, budget=reserve,
                  render=lambda c: render(opts, c), count=lambda t: _tokens(core, tour, t))
    chosen = sorted(packed.kept, key=lambda k: (k[0].source_kind != "document",
                                                k[0].document_id or "", k[0].position, k[0].part))
    if opts.depth == 0:
        chosen.reverse()
    for c, text, tokens in chosen:
        tour.prompt.insert_at_depth(opts.depth, Element(
            id=f"retrieval:{c.id}", role=opts.role, content=text, source=c.source(),
            kind="retrieval", priority=int(c.score * 1000), tokens=tokens,
            meta={"score": round(c.score, 4), "label": c.label, "position": c.position},
        ))
    report.update(
        query="\n".join(reversed(texts)), budget=reserve, **found.diagnostics(),
        inserted=[{"id": f"retrieval:{c.id}", "source": c.source(), "label": c.label,
                   "score": round(c.score, 4), "tokens": tokens} for c, _, tokens in packed.kept],
        cut=packed.cut[:50],
    )


async def _index_later(service: MemoryService, tour: Tour,
                       messages: list[Element] | None = None) -> None:
    """Leave this tour's new messages out of the index at its save when nothing can search
    them before they are indexed anyway: retrieval found every message in the prompt (or is
    off) and no embedding backend needs their vectors ready in advance. The lexical index
    catches up the moment it is searched: retrieval's backfill and `POST /v1/memory/search`
    index what is missing first (`memory/index.py`), as for an imported chat. `messages`:
    the prompt's message elements when the caller has them (`_window`), else read here."""
    if await service.backend() is not None:
        return
    tour.data["index_at_save"] = False
    # what the save would have indexed (the newest messages: a new answer, a new variant of
    # one) is left to the backfill, which goes on from `indexed_to`: it must start there
    if messages is None:
        messages = _chat_messages(tour)
    newest = [int(el.meta.get("position", 0)) for el in messages[-4:]]
    state = tour.data["chat"].setdefault("state", {}).setdefault("retrieval", {})
    if newest and int(state.get("indexed_to") or 0) > min(newest):
        state["indexed_to"] = min(newest)


async def _any_documents(s: Any, tour: Tour, opts: RetrievalOptions) -> bool:
    """Whether a data-bank document is in this chat's scope (one indexed lookup)."""
    if not opts.documents:
        return False
    keys = chat_keys(tour.chat_id, tour.data["chat"].get("character_id"),
                     messages=False, documents=True)

    # a document's chunks come and go with its row in `retrieval_documents` (the topic)
    return await recall(s, "documents", tuple(keys), lambda: any_chunk(s, keys))


def render(opts: RetrievalOptions, c: Candidate) -> str:
    """A result as prompt text, through the message or document template."""
    template = opts.document_template if c.source_kind == "document" else opts.message_template
    values = {"name": c.label, "text": c.text}
    return _FIELD.sub(lambda m: values[m.group(1)], template)
