"""Stage 6, token counting: count every element with the connection's tokenizer profile (R2.6).

Must not: remove anything (stage 7 does). Counts are cached per (profile, text) in one
process-wide cache, so recounting after interceptors costs only what changed, and by text for
the tour (`_tour_counts`): the history other stages counted first is not looked up again. Each
element's count includes the format's per-message overhead: role markers in chat mode,
the instruct template's sequences in text mode (whose fixed frame is counted once).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evacore.logs import get_logger
from evacore.tokenize import TokenizerProfile, cached_count, cached_count_async
from evacore.tokenize import get_profile as _get_profile

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour
    from evacore.prompt.elements import Element

log = get_logger(__name__)

MESSAGE_OVERHEAD = 3
"""Tokens a chat format spends around each message (role markers)."""
REPLY_PRIMING = 3
IMAGE_TOKENS = 85
TEXT_KINDS = ("openai-text", "kobold")
_STORY_IDS = frozenset({"main", "persona", "card.description", "card.personality",
                        "card.scenario"})
_STORY_FIELDS = ("system", "description", "personality", "scenario", "persona", "wiBefore",
                 "wiAfter", "loreBefore", "loreAfter")


@dataclass(frozen=True)
class Frame:
    """What the prompt format costs besides the elements' text: per element by role, per
    example line, and once per prompt (reply priming; in text mode the story string's own
    text, chat start and the generation line)."""

    user: int = MESSAGE_OVERHEAD
    assistant: int = MESSAGE_OVERHEAD
    system: int = MESSAGE_OVERHEAD
    story: int = MESSAGE_OVERHEAD
    """Elements that go into a text template's story string (no turn of their own)."""
    example_line: int = 0
    """Text mode: each example line is a turn of its own."""
    separator: int = 0
    fixed: int = REPLY_PRIMING

    def overhead(self, el: Element) -> int:
        if el.kind == "examples" and self.example_line:
            lines = sum(1 for line in el.text.splitlines() if line.strip())
            return self.separator + self.example_line * max(1, lines)
        if el.id in _STORY_IDS or (el.kind == "lore" and el.meta.get("position")
                                   in ("before_char", "after_char")):
            return self.story
        role = el.role
        return self.user if role == "user" else self.assistant if role == "assistant" \
            else self.system


CHAT_FRAME = Frame()


def profile_for(core: Core, tour: Tour) -> TokenizerProfile:
    """The connection's profile (cached per tour); a profile that cannot load falls back."""
    profile = tour.data.get("tokenizer")
    if profile is not None:
        return profile
    conn = tour.data["connection"]
    pool = core.providers
    try:
        profile = _get_profile(conn.get("tokenizer"), model=conn.get("model"),
                               base_url=conn.get("base_url"),
                               http_client=getattr(pool, "client", None))
    except Exception as exc:  # noqa: BLE001 - a broken tokenizer must not break the chat
        log.warning("tokenizer.fallback", spec=conn.get("tokenizer"), error=str(exc))
        profile = _get_profile("heuristic")
        tour.diagnostics.setdefault("tokens", {})["warning"] = (
            f"tokenizer {conn.get('tokenizer')!r} could not load ({exc}); counted with the "
            "heuristic instead")
    tour.data["tokenizer"] = profile
    tour.diagnostics.setdefault("tokens", {})["profile"] = profile.name
    return profile


def frame_of(tour: Tour) -> Frame:
    return tour.data.get("text_frame") or CHAT_FRAME


async def text_frame(core: Core, tour: Tour) -> Frame:
    """The instruct template's cost for a text connection, per role as stage 9 renders each
    turn (sequence, the speaker's name when the template shows names, suffix; the longest
    of the first/normal/last sequences); chat connections keep the chat overhead."""
    conn = tour.data["connection"]
    if conn["kind"] not in TEXT_KINDS:
        return CHAT_FRAME
    from evacore.errors import EvacoreError
    from evacore.pipeline.stages.instruct import resolve_templates
    from evacore.render import render_story_string

    try:
        instruct, context = await resolve_templates(core, conn)
    except EvacoreError:  # stage 9 reports the unknown preset
        return CHAT_FRAME
    i = instruct
    char = tour.data["character"].get("name") or "Assistant"
    user = tour.data["persona"]["name"]
    names = i.names_behavior == "always"

    profile = profile_for(core, tour)
    counted: dict[str, int] = {}

    async def ask(text: str) -> None:
        if text and text not in counted:
            counted[text] = await cached_count_async(core.count_cache, profile, text)

    def count(text: str) -> int:
        return counted.get(text, 0) if text else 0

    def turn_text(sequences: tuple[str, ...], suffix: str, name: str) -> str:
        named = f"{name}: " if names and name else ""
        return max(sequences, key=len) + "\n" + named + (suffix or "\n")

    def turn(sequences: tuple[str, ...], suffix: str, name: str) -> int:
        return count(turn_text(sequences, suffix, name)) + 1

    same = i.system_same_as_user or not i.system_sequence
    story = render_story_string(
        context, {key: "x" for key in _STORY_FIELDS} | {"char": char, "user": user},
        instruct=instruct)
    generation = max((i.output_sequence, i.last_output_sequence), key=len)
    # every piece counted through the profile's async path (a remote tokenizer is asked)
    for text in (turn_text((i.input_sequence, i.first_input_sequence, i.last_input_sequence),
                           i.input_suffix, user),
                 turn_text((i.output_sequence, i.first_output_sequence,
                            i.last_output_sequence), i.output_suffix, char),
                 turn_text((i.input_sequence,), i.input_suffix, ""),
                 turn_text((i.system_sequence, i.last_system_sequence), i.system_suffix, ""),
                 turn_text((i.output_sequence,), i.output_suffix, ""),
                 context.example_separator, story, i.story_string_prefix,
                 i.story_string_suffix, context.chat_start,
                 generation + "\n" + (f"{char}:" if names else "")):
        await ask(text)
    return Frame(
        user=turn((i.input_sequence, i.first_input_sequence, i.last_input_sequence),
                  i.input_suffix, user),
        assistant=turn((i.output_sequence, i.first_output_sequence, i.last_output_sequence),
                       i.output_suffix, char),
        system=(turn((i.input_sequence,), i.input_suffix, "") if same else
                turn((i.system_sequence, i.last_system_sequence), i.system_suffix, "")),
        story=1,
        example_line=max(turn((i.input_sequence,), i.input_suffix, ""),
                         turn((i.output_sequence,), i.output_suffix, "")),
        separator=count(context.example_separator) + 1 if context.example_separator else 0,
        fixed=(REPLY_PRIMING + count(story) + count(i.story_string_prefix)
               + count(i.story_string_suffix) + count(context.chat_start) + 1
               + count(generation + "\n" + (f"{char}:" if names else "")) + 1),
    )


def _parts(el: Element, frame: Frame = CHAT_FRAME) -> tuple[str, int]:
    """The text to count and the fixed extras (format overhead, images, name, tool calls)."""
    extra = frame.overhead(el) + (1 if el.name else 0)
    if not isinstance(el.content, str):
        extra += IMAGE_TOKENS * sum(1 for p in el.content if p.get("type") == "image_url")
    text = el.text
    if el.tool_calls:
        text += json.dumps(el.tool_calls, separators=(",", ":"), ensure_ascii=False)
    return text, extra


def _tour_counts(tour: Tour, profile: TokenizerProfile) -> dict[str, int] | None:
    """This tour's counts by text (the same history is counted by several stages; a lookup
    here is a fraction of the shared cache's, which hashes each text), for a profile that
    counts in the process. None for a remote one: its synchronous count is an estimate
    until the backend answers, and must not stand for the exact one."""
    if getattr(profile, "known", None) is not None or getattr(profile, "degraded", False):
        return None
    counts: dict[str, int] | None = tour.data.get("token_counts")
    if counts is None:
        counts = tour.data["token_counts"] = {}
    return counts


def count_text(core: Core, tour: Tour, text: str) -> int:
    """Tokens of one text with this tour's profile (cached; sync)."""
    profile = profile_for(core, tour)
    counts = _tour_counts(tour, profile)
    if counts is None:
        return cached_count(core.count_cache, profile, text)
    found = counts.get(text)
    if found is None:
        found = counts[text] = cached_count(core.count_cache, profile, text)
    return found


def text_counter(core: Core, tour: Tour) -> Callable[[str], int]:
    """`count_text` for many texts of one tour (every message of a history): the profile and
    the tour's counts looked up once, not for each text."""
    cache, profile = core.count_cache, profile_for(core, tour)
    counts = _tour_counts(tour, profile)
    if counts is None:
        return lambda text: cached_count(cache, profile, text)
    get = counts.get

    def count(text: str) -> int:
        found = get(text)
        if found is None:
            found = counts[text] = cached_count(cache, profile, text)
        return found

    return count


async def count_elements(core: Core, tour: Tour) -> int:
    """Count elements without a count; returns the prompt's total (frame included)."""
    cache, profile, frame = core.count_cache, profile_for(core, tour), frame_of(tour)
    counts = _tour_counts(tour, profile)
    total = frame.fixed
    reused = 0
    by_role = {"user": frame.user, "assistant": frame.assistant}
    for el in tour.prompt:
        if el.tokens is None:
            text = el.content
            if (el.kind == "history" and type(text) is str and not el.tool_calls
                    and not el.name):
                # a stored message's plain text (most of a long chat's elements): what
                # `_parts` makes of it, without its calls
                extra = by_role.get(el.role, frame.system)
            else:
                text, extra = _parts(el, frame)
            found = counts.get(text) if counts is not None else None
            if found is None:
                found = await cached_count_async(cache, profile, text)
                if counts is not None:
                    counts[text] = found
            else:
                reused += 1
            el.tokens = found + extra
        total += el.tokens
    tour.data["token_counts_reused"] = tour.data.get("token_counts_reused", 0) + reused
    return total


class TokenCount:
    number = 6
    name = "token_count"

    async def run(self, core: Core, tour: Tour) -> None:
        cache = core.count_cache
        hits, reused = cache.hits, tour.data.get("token_counts_reused", 0)
        frame = tour.data["text_frame"] = await text_frame(core, tour)
        total = await count_elements(core, tour)
        d: dict[str, Any] = tour.diagnostics.setdefault("tokens", {})
        # counts not made anew: found in the shared cache, or counted earlier in this tour
        d.update(prompt=total, elements=len(tour.prompt), frame=frame.fixed,
                 cache_hits=cache.hits - hits + tour.data["token_counts_reused"] - reused)
