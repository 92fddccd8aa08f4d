"""Which of an entry's keys occur in the part of the haystack that entry may see, and
whether its primary/secondary keys satisfy its selective logic.

Must not: apply activation rules beyond the keys (scan.py does) or match text itself
(the haystack did, once per segment).
"""

from __future__ import annotations

from collections.abc import Callable

from evacore.lore._haystack import Haystack
from evacore.lore._index import DYNAMIC, PLAIN, REGEX, KeyRef, ScanEntry
from evacore.lore.model import MAX_SCAN_DEPTH, SelectiveLogic, WorldInfoSettings


class KeyView:
    def __init__(
        self, hay: Haystack, settings: WorldInfoSettings, macros: Callable[[str], str] | None
    ) -> None:
        self.hay = hay
        self.s = settings
        self.macros = macros
        self._dynamic: dict[str, str] = {}

    def mask(self, se: ScanEntry, skew: int, with_recursion: bool) -> int:
        """Segments the entry sees: its newest N messages, its extra haystacks, injected
        prompts and (unless a min-activations pass) the recursion buffer. N ≤ 0 sees nothing."""
        e = se.entry
        if e.scan_depth is not None:
            n = e.scan_depth
        elif se.book.scan_depth is not None:
            n = se.book.scan_depth + skew
        else:
            n = self.s.depth + skew
        n = min(n, MAX_SCAN_DEPTH)
        if n <= 0:
            return 0
        mask = self.hay.message_mask(n) | self.hay.inject_mask
        if se.extras:
            mask |= self.hay.extras_mask(se.extras)
        if with_recursion and se.recursion is not False:
            mask |= self.hay.recursion_mask
        return mask

    def whole_words(self, se: ScanEntry) -> bool:
        ww = se.entry.match_whole_words
        return self.s.match_whole_words if ww is None else ww

    def hits(self, kr: KeyRef, se: ScanEntry, whole: bool, mask: int) -> int:
        """Bitmask of the segments in `mask` where this key occurs."""
        if kr.kind == PLAIN:
            table = self.hay.word if whole and kr.single else self.hay.sub
            return table.get(kr.pid, 0) & mask
        if kr.kind == REGEX:
            return self.hay.rx.get(kr.pid, 0) & mask
        if kr.kind == DYNAMIC:
            text = self._dynamic.get(kr.text)
            if text is None:
                raw = self.macros(kr.text) if self.macros else kr.text
                text = self._dynamic[kr.text] = raw.strip()
            return self.hay.dynamic(text, se.case_sensitive, whole, mask)
        return 0

    def match(self, se: ScanEntry, mask: int) -> list[str] | None:
        """Reasons if the first matching primary key and the secondary logic pass, else None."""
        if not mask:
            return None
        whole = self.whole_words(se)
        label = self.hay.label
        for kr in se.primary:
            hits = self.hits(kr, se, whole, mask)
            if hits:
                break
        else:
            return None
        reasons = [f"key {kr.text!r} in {label(hits)}"]
        e = se.entry
        if not (e.selective and e.secondary_keys):
            return reasons
        logic = e.selective_logic
        any_hit, all_hit = False, True
        for kr in se.secondary:
            hits = self.hits(kr, se, whole, mask)
            any_hit = any_hit or bool(hits)
            all_hit = all_hit and bool(hits)
            if logic == SelectiveLogic.AND_ANY and hits:
                return reasons + [f"secondary {kr.text!r} in {label(hits)} (AND ANY)"]
            if logic == SelectiveLogic.NOT_ALL and not hits:
                return reasons + [f"secondary {kr.text!r} absent (NOT ALL)"]
        if logic == SelectiveLogic.NOT_ANY and not any_hit:
            return reasons + ["no secondary key present (NOT ANY)"]
        if logic == SelectiveLogic.AND_ALL and all_hit:
            return reasons + ["all secondary keys present (AND ALL)"]
        return None

    def score(self, se: ScanEntry, mask: int) -> int:
        """Group scoring: matching primary keys, plus secondary ones under AND ANY, or under
        AND ALL when all of them match."""
        if not se.primary:
            return 0
        whole = self.whole_words(se)
        primary = sum(1 for kr in se.primary if self.hits(kr, se, whole, mask))
        secondary = sum(1 for kr in se.secondary if self.hits(kr, se, whole, mask))
        if se.secondary:
            logic = se.entry.selective_logic
            if logic == SelectiveLogic.AND_ANY:
                return primary + secondary
            if logic == SelectiveLogic.AND_ALL and secondary == len(se.secondary):
                return primary + secondary
        return primary
