"""The text a scan searches, as numbered segments (messages newest first, extra haystacks,
injected prompts, recursion buffer) with the keys found in each, as bitmasks.

Must not: decide which segments an entry sees (scan.py does) or activate anything.
Each segment is matched once, the first time a scan needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import re2

from evacore.lore._keys import UnsupportedRegex, compile_regex_key, find_plain, regex_options
from evacore.lore._matcher import HitMap, KeyMatcher

N_EXTRAS = 6


class Haystack:
    def __init__(
        self,
        matcher: KeyMatcher,
        messages: Sequence[str],
        names: Sequence[str],
        extras: Mapping[int, tuple[str, str]],
        inject: Sequence[tuple[str, str]],
    ) -> None:
        """`messages`/`names` newest first; `extras`: kind index → (label, text);
        `inject`: (label, text) parts scanned for every entry."""
        self._matcher = matcher
        self.sub: HitMap = {}
        self.word: HitMap = {}
        self.rx: HitMap = {}
        self.message_count = len(messages)
        self.texts: list[str] = list(messages) + [""] * N_EXTRAS
        self.labels: list[str] = [
            f"message {d} ({names[d]})" if names[d] else f"message {d}" for d in range(len(messages))
        ] + [""] * N_EXTRAS
        self._scanned = 0
        self.extras_bits: dict[int, int] = {}
        self.inject_mask = 0
        self.recursion_mask = 0
        self._dynamic: dict[tuple[str, bool, bool, int], bool] = {}
        self._dynamic_rx: dict[str, object] = {}
        self.dynamic_problems: list[str] = []
        for kind, (label, text) in extras.items():
            bit = 1 << (self.message_count + kind)
            self.texts[self.message_count + kind] = text
            self.labels[self.message_count + kind] = label
            self.extras_bits[kind] = bit
            self._match(text, bit)
        for label, text in inject:
            self.inject_mask |= self._append(text, label)

    def _append(self, text: str, label: str) -> int:
        bit = 1 << len(self.texts)
        self.texts.append(text)
        self.labels.append(label)
        self._match(text, bit)
        return bit

    def _match(self, text: str, bit: int) -> None:
        self._matcher.match(text, bit, self.sub, self.word, self.rx)

    def message_mask(self, n: int) -> int:
        """Bits of the newest n messages, matching them first if needed."""
        n = min(n, self.message_count)
        while self._scanned < n:
            self._match(self.texts[self._scanned], 1 << self._scanned)
            self._scanned += 1
        return (1 << n) - 1 if n > 0 else 0

    def extras_mask(self, kinds: Sequence[int]) -> int:
        mask = 0
        for kind in kinds:
            mask |= self.extras_bits.get(kind, 0)
        return mask

    def add_recursion(self, text: str, scan_pass: int) -> None:
        self.recursion_mask |= self._append(text, f"recursion buffer (after pass {scan_pass})")

    def hit_ids(self) -> set[int]:
        return self.sub.keys() | self.rx.keys()

    def label(self, mask: int) -> str:
        """Where the lowest segment of `mask` comes from (the newest message first)."""
        if not mask:
            return "nowhere"
        return self.labels[(mask & -mask).bit_length() - 1]

    def dynamic(self, key: str, case_sensitive: bool, whole_words: bool, mask: int) -> int:
        """Match a key known only at scan time (after macro substitution) on the segments in mask."""
        if not key:
            return 0
        regex = self._regex(key)
        if regex is False:
            return 0
        found = 0
        bits = mask
        while bits:
            low = bits & -bits
            bits ^= low
            seg = low.bit_length() - 1
            memo = (key, case_sensitive, whole_words, seg)
            hit = self._dynamic.get(memo)
            if hit is None:
                text = self.texts[seg]
                if regex is not None:
                    hit = regex.search("\x01" + text) is not None  # type: ignore[attr-defined]
                elif case_sensitive:
                    hit = find_plain(text, key, whole_words)
                else:
                    hit = find_plain(text.lower(), key.lower(), whole_words)
                self._dynamic[memo] = hit
            if hit:
                found |= low
        return found

    def _regex(self, key: str) -> object:
        if key not in self._dynamic_rx:
            try:
                rk = compile_regex_key(key)
                self._dynamic_rx[key] = None if rk is None else re2.compile(rk.pattern, regex_options())
            except UnsupportedRegex as exc:
                self.dynamic_problems.append(str(exc))
                self._dynamic_rx[key] = False
        return self._dynamic_rx[key]
