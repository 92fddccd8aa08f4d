"""The World Info scan (R2.4): which lorebook entries activate for this chat, in what order,
within what budget, following SillyTavern's scan loop (reference §2.4).

Must not: build the prompt, count tokens itself, or store state; the caller places the
activations, supplies `count_tokens`, and persists the returned `TimedState`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evacore.lore._groups import filter_groups
from evacore.lore._haystack import Haystack
from evacore.lore._index import EXTRA_KINDS, CompiledLore, ScanEntry, clear_cache, compile_books
from evacore.lore._keyview import KeyView
from evacore.lore.model import MAX_SCAN_DEPTH, WorldInfoSettings
from evacore.lore.records import (
    Activation,
    CharacterInfo,
    Cut,
    CutReason,
    ScanMessage,
    ScanResult,
    SourcedBook,
)
from evacore.lore.timed import TimedEffects, TimedState

__all__ = ["clear_index_cache", "compute_budget", "scan"]

NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3
_STATE_NAMES = {INITIAL: "initial", RECURSION: "recursion", MIN_ACTIVATIONS: "min activations"}


def compute_budget(settings: WorldInfoSettings, max_context: int) -> int:
    """Tokens entries may use: budget % of the context (at least 1), then the cap."""
    budget = math.floor(float(settings.budget) * max_context / 100 + 0.5) or 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    return budget


def clear_index_cache() -> None:
    """Forget compiled books (the next scan rebuilds the key automata)."""
    clear_cache()


@dataclass
class _Admitted:
    reasons: list[str]
    level: int
    content: str
    tokens: int


def scan(
    books: Sequence[SourcedBook],
    chat: Sequence[ScanMessage],
    settings: WorldInfoSettings,
    timed_state: TimedState,
    *,
    seed: int,
    turn: int,
    generation_type: str = "normal",
    max_context: int,
    count_tokens: Callable[[str], int],
    character: CharacterInfo | None = None,
    persona_description: str = "",
    extra_haystack: Mapping[str, str] | None = None,
    macros: Callable[[str], str] | None = None,
    force: Collection[tuple[str, int]] = (),
    dry_run: bool = False,
) -> ScanResult:
    """Scan `chat` (oldest first, the message being answered last) against `books`.

    `turn`: chat length in messages, for timed effects. `max_context`: context size minus
    the answer length, base of the % budget. `extra_haystack`: named texts scanned for
    every entry (Author's Note or depth prompt with scanning on). `macros`: substitutes
    macros in keys and content. `force`: (book name, uid) pairs activated regardless of
    keys. `dry_run`: timed effects are neither checked nor recorded.
    """
    compiled, cached = compile_books(books, settings.character_strategy, settings.case_sensitive)
    run = _Scan(
        compiled, chat, settings, timed_state, seed=seed, turn=turn,
        generation_type=generation_type, max_context=max_context, count_tokens=count_tokens,
        character=character, persona_description=persona_description,
        extra_haystack=extra_haystack or {}, macros=macros, force=force, dry_run=dry_run,
    )
    return run.run(cached)


class _Scan:
    def __init__(
        self, compiled: CompiledLore, chat: Sequence[ScanMessage], settings: WorldInfoSettings,
        timed_state: TimedState, *, seed: int, turn: int, generation_type: str,
        max_context: int, count_tokens: Callable[[str], int], character: CharacterInfo | None,
        persona_description: str, extra_haystack: Mapping[str, str],
        macros: Callable[[str], str] | None, force: Collection[tuple[str, int]], dry_run: bool,
    ) -> None:
        self.c = compiled
        self.entries = compiled.entries
        self.s = settings
        self.seed = seed
        self.turn = turn
        self.gen = generation_type
        self.count_tokens = count_tokens
        self.character = character
        self.macros = macros
        self.dry_run = dry_run
        self.rng = random.Random(seed)
        self.budget = compute_budget(settings, max_context)

        visible = [m for m in chat if not m.is_system]
        self.chat_len = len(visible)
        newest = visible[::-1][:MAX_SCAN_DEPTH]
        texts = [
            (f"{m.name}: {m.text}" if settings.include_names else m.text).strip() for m in newest
        ]
        extras: dict[int, tuple[str, str]] = {}
        sources = {
            0: persona_description,
            1: character.description if character else "",
            2: character.personality if character else "",
            3: character.depth_prompt if character else "",
            4: character.scenario if character else "",
            5: character.creator_notes if character else "",
        }
        for kind, text in sources.items():
            if text:
                extras[kind] = (EXTRA_KINDS[kind][1], text)
        inject = [(f"injected '{k}'", v) for k, v in extra_haystack.items() if v]
        self.hay = Haystack(compiled.matcher, texts, [m.name for m in newest], extras, inject)
        self.keys = KeyView(self.hay, settings, macros)
        self.timed = TimedEffects(
            timed_state, self.entries, turn, dry_run=dry_run, with_delay=compiled.with_delay,
            find_hash=compiled.find_hash,
        )
        self.forced = {compiled.by_key[f"{b}.{u}"] for b, u in force if f"{b}.{u}" in compiled.by_key}
        self.any_recursive = settings.recursive or compiled.any_book_recursive

        self.state = INITIAL
        self.skew = 0
        self.level = 0
        self.count = 0
        self.overflow = False
        self.active: dict[int, _Admitted] = {}
        self.failed: set[int] = set()
        self.cuts: dict[int, Cut] = {}
        self.all_text = ""
        self.book_used: dict[str, int] = {}
        self._contents: dict[int, str] = {}
        self.warnings: list[str] = []

    # -- the loop ---------------------------------------------------------------------------

    def run(self, cached: bool) -> ScanResult:
        levels = list(self.c.delay_levels)
        self.level = levels.pop(0) if levels else 0
        while self.state:
            if self.s.max_recursion_steps and self.count >= self.s.max_recursion_steps:
                break
            self.count += 1
            now, reasons = self._collect()
            for_recursion = self._admit(now, reasons)
            nxt = NONE
            if not self.overflow and any(self._recursive(self.entries[i]) for i in for_recursion):
                nxt = RECURSION
            if (self.any_recursive and not self.overflow and self.state == MIN_ACTIVATIONS
                    and self.hay.recursion_mask):
                nxt = RECURSION
            if (not nxt and not self.overflow and self.s.min_activations > 0
                    and len(self.active) < self.s.min_activations):
                depth = self.s.depth + self.skew
                over = (self.s.min_activations_depth_max > 0
                        and depth > self.s.min_activations_depth_max) or depth > self.chat_len
                if not over:
                    nxt = MIN_ACTIVATIONS
                    self.skew += 1
            if nxt == NONE and levels:
                nxt = RECURSION
                self.level = levels.pop(0)
            self.state = nxt
            if self.state:
                text = "\n".join(self._content(i) for i in for_recursion)
                if text:
                    self.hay.add_recursion(text, self.count)
                    self.all_text = text + "\n" + self.all_text
        new_state = self.timed.finish(self.active)
        return self._result(new_state, cached)

    def _collect(self) -> tuple[list[int], dict[int, list[str]]]:
        """One pass over the entries: the ones that would activate now, in merged order."""
        c, s = self.c, self.s
        needed = max(s.depth + self.skew, c.max_own_depth,
                     (c.max_book_depth + self.skew) if c.max_book_depth is not None else 0)
        self.hay.message_mask(min(needed, MAX_SCAN_DEPTH))
        candidates = set(c.always) | self.timed.sticky | self.forced
        users = c.primary_users
        for pid in self.hay.hit_ids():
            found = users.get(pid)
            if found:
                candidates.update(found)
        now: list[int] = []
        reasons: dict[int, list[str]] = {}
        for idx in sorted(candidates):
            why = self._consider(idx)
            if why:
                now.append(idx)
                reasons[idx] = why
        return now, reasons

    def _consider(self, idx: int) -> list[str] | None:
        if idx in self.failed or idx in self.active:
            return None
        se = self.entries[idx]
        e = se.entry
        sticky = idx in self.timed.sticky
        skip = self._skip_rule(se, idx, sticky)
        if skip is not None:
            if self._would_activate(se, idx, sticky):
                self._cut(idx, *skip)
            return None
        if "@@activate" in se.decorators:
            return ["decorator @@activate"]
        if "@@dont_activate" in se.decorators:
            if e.constant or (e.keys and self._match_keys(se)):
                self._cut(idx, "decorator", "@@dont_activate")
            return None
        if idx in self.forced:
            return ["forced"]
        if e.constant:
            return ["constant"]
        if sticky:
            return ["sticky"]
        if not e.keys:
            return None
        return self._match_keys(se)

    def _skip_rule(self, se: ScanEntry, idx: int, sticky: bool) -> tuple[CutReason, str] | None:
        e = se.entry
        if e.disable:
            return "disabled", ""
        if e.triggers and self.gen not in e.triggers:
            return "trigger", f"{self.gen!r} not in {list(e.triggers)}"
        filtered = self._filtered(se)
        if filtered:
            return "character_filter", filtered
        if idx in self.timed.delay:
            return "delay", f"until the chat has {e.delay} messages"
        if idx in self.timed.cooldown and not sticky:
            return "cooldown", ""
        if not sticky and e.delay_level:
            if self.state != RECURSION:
                return "delay_until_recursion", f"waits for recursion level {e.delay_level}"
            if e.delay_level > self.level:
                return "delay_until_recursion", f"level {e.delay_level} > current {self.level}"
        if (not sticky and self.state == RECURSION and self._recursive(se)
                and e.exclude_recursion):
            return "exclude_recursion", ""
        return None

    def _filtered(self, se: ScanEntry) -> str:
        flt = se.entry.character_filter
        if flt is None:
            return ""
        if flt.names:
            included = self.character is not None and self.character.filter_name in flt.names
            if included if flt.is_exclude else not included:
                return "character name " + ("excluded" if flt.is_exclude else "not listed")
        if flt.tags and self.character is not None:
            has_tag = any(t in flt.tags for t in self.character.tags)
            if has_tag if flt.is_exclude else not has_tag:
                return "character tag " + ("excluded" if flt.is_exclude else "not listed")
        return ""

    def _would_activate(self, se: ScanEntry, idx: int, sticky: bool) -> bool:
        if "@@activate" in se.decorators or idx in self.forced:
            return True
        if "@@dont_activate" in se.decorators:
            return False
        e = se.entry
        return e.constant or sticky or bool(e.keys and self._match_keys(se))

    # -- key matching ----------------------------------------------------------------------

    def _recursive(self, se: ScanEntry) -> bool:
        return self.s.recursive if se.recursion is None else se.recursion

    def _match_keys(self, se: ScanEntry) -> list[str] | None:
        return self.keys.match(se, self.keys.mask(se, self.skew, self.state != MIN_ACTIVATIONS))

    def _score(self, idx: int) -> int:
        se = self.entries[idx]
        return self.keys.score(se, self.keys.mask(se, self.skew, self.state != MIN_ACTIVATIONS))

    # -- admission -------------------------------------------------------------------------

    def _content(self, idx: int) -> str:
        text = self._contents.get(idx)
        if text is None:
            body = self.entries[idx].body
            text = self._contents[idx] = self.macros(body) if self.macros and body else body
        return text

    def _cut(self, idx: int, reason: CutReason, detail: str = "") -> None:
        """Record why an entry is left out; a later pass's reason replaces an earlier one."""
        se = self.entries[idx]
        self.cuts[idx] = Cut(se.entry, se.book_name, se.source, reason, detail)  # type: ignore[arg-type]

    def _admit(self, now: list[int], reasons: dict[int, list[str]]) -> list[int]:
        """Groups, probability and budget over this pass's candidates; returns the ones whose
        text feeds recursion (not failed by probability, even if cut by the budget)."""
        sticky = self.timed.sticky
        now.sort(key=lambda i: (0 if i in sticky else 1, i))
        active_groups = {self.entries[i].entry.group for i in self.active}
        new = filter_groups(
            now, self.entries, sticky=sticky, cooling=self.timed.cooldown | self.timed.delay,
            active_groups=active_groups, global_scoring=self.s.use_group_scoring,
            score=self._score, rng=self.rng, removed=lambda i, why: self._cut(i, "group", why),
        )
        text_tokens = self.count_tokens(self.all_text) if self.all_text else 0
        new_tokens = 0
        mandatory_left = sum(1 for i in new if self.entries[i].entry.mandatory)
        for pos, idx in enumerate(new):
            se = self.entries[idx]
            e = se.entry
            if e.mandatory:
                mandatory_left -= 1
            if self.overflow and not e.mandatory:
                for rest in new[pos:]:
                    if not self.entries[rest].entry.mandatory:
                        self._cut(rest, "budget", f"budget of {self.budget} tokens already spent")
                if mandatory_left > 0:
                    continue
                break
            if not self._roll(idx):
                self.failed.add(idx)
                self._cut(idx, "probability", f"failed its {e.probability}% roll")
                continue
            content = self._content(idx)
            size = self.count_tokens(content) if content else 0
            book_budget = se.book.token_budget
            used = self.book_used.get(se.book_name, 0)
            if not e.mandatory and book_budget is not None and used + size > book_budget:
                self._cut(idx, "book_budget", f"book '{se.book_name}' allows {book_budget} tokens")
                continue
            total = text_tokens + new_tokens + size
            new_tokens += size
            if not e.mandatory and total >= self.budget:
                self._cut(idx, "budget", f"{total} tokens ≥ budget {self.budget}")
                if not self.overflow and self.s.overflow_alert:
                    self.warnings.append(
                        f"World Info budget reached after {len(self.active)} entries"
                    )
                self.overflow = True
                continue
            self.book_used[se.book_name] = used + size
            why = list(reasons[idx])
            if self.count > 1:
                why.append(f"pass {self.count} ({_STATE_NAMES[self.state]})")
            if e.mandatory:
                why.append("mandatory: exempt from the budget")
            self.active[idx] = _Admitted(why, self.count - 1, content, size)
        return [
            i for i in new
            if i not in self.failed
            and not self.entries[i].entry.prevent_recursion and self.entries[i].recursion is not False
        ]

    def _roll(self, idx: int) -> bool:
        e = self.entries[idx].entry
        if not e.use_probability or e.probability is None or e.probability == 100:
            return True
        if idx in self.timed.sticky:
            return True
        return self.rng.random() * 100 <= e.probability

    # -- output ----------------------------------------------------------------------------

    def _result(self, new_state: TimedState, cached: bool) -> ScanResult:
        items = list(self.active.items())
        items.sort(key=lambda kv: -self.entries[kv[0]].entry.order)
        items.reverse()
        activated: list[Activation] = []
        for idx, adm in items:
            se = self.entries[idx]
            e = se.entry
            if not adm.content:
                self._cut(idx, "empty", "nothing to insert")
                continue
            activated.append(Activation(
                entry=e, book_name=se.book_name, source=se.source,  # type: ignore[arg-type]
                position=e.position, depth=e.depth, role=e.role, order=e.order,
                content=adm.content, outlet_name=e.outlet_name, mandatory=e.mandatory,
                reasons=adm.reasons, recursion_level=adm.level, tokens=adm.tokens,
            ))
        shown = {i for i, a in self.active.items() if a.content}
        cut = [self.cuts[i] for i in sorted(self.cuts) if i not in shown]
        diagnostics: dict[str, Any] = {
            "seed": self.seed,
            "turn": self.turn,
            "generation_type": self.gen,
            "dry_run": self.dry_run,
            "budget": self.budget,
            "tokens_used": sum(a.tokens for a in self.active.values()),
            "overflowed": self.overflow,
            "passes": self.count,
            "scan_depth": self.s.depth + self.skew,
            "index": {
                "cached": cached, "build_ms": round(self.c.build_ms, 3),
                "entries": len(self.entries), "plain_keys": self.c.matcher.plain_count,
                "regex_keys": self.c.matcher.regex_count,
            },
            "books": self.c.books,
            "skipped_keys": list(self.c.problems)
            + [{"book": None, "uid": None, "key": None, "error": p} for p in self.hay.dynamic_problems],
            "timed": {
                "sticky": sorted(self.entries[i].key for i in self.timed.sticky),
                "cooldown": sorted(self.entries[i].key for i in self.timed.cooldown),
                "delay": sorted(self.entries[i].key for i in self.timed.delay),
                "events": self.timed.events,
            },
            "activated": [
                {"book": a.book_name, "uid": a.uid, "comment": a.entry.comment,
                 "reasons": a.reasons, "pass": a.recursion_level, "tokens": a.tokens}
                for a in activated
            ],
            "cut": [
                {"book": c.book_name, "uid": c.uid, "comment": c.entry.comment,
                 "reason": c.reason, "detail": c.detail}
                for c in cut
            ],
            "warnings": self.warnings,
        }
        return ScanResult(activated=activated, cut=cut, timed_state=new_state, seed=self.seed,
                          diagnostics=diagnostics)
