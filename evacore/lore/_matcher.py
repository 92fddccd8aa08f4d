"""All keys of a set of books matched in one pass per text: Aho–Corasick automata for plain
keys (one per case mode), RE2 sets for regex keys (one per flag group).

Must not: know about entries, settings or activation rules; it only reports which key ids
occur in a text (and whether with word boundaries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ahocorasick
import re2

from evacore.lore._keys import RegexKey, bounded, is_single_word, regex_options

HitMap = dict[int, int]
"""Key id → bitmask of the haystack segments it was found in."""


@dataclass
class KeyMatcher:
    """Collects distinct keys, then matches them all at once against each segment."""

    plain_count: int = 0
    _ids: dict[tuple[str, object], int] = field(default_factory=dict)
    _plain: dict[bool, dict[str, tuple[int, int, bool]]] = field(
        default_factory=lambda: {True: {}, False: {}}
    )
    _regex: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    _automata: dict[bool, ahocorasick.Automaton] = field(default_factory=dict)
    _sets: list[tuple[re2.Set, list[int]]] = field(default_factory=list)
    _next: int = 0

    def add_plain(self, text: str, case_sensitive: bool) -> int:
        """Register a plain key (already trimmed; lower-cased here when case-insensitive)."""
        needle = text if case_sensitive else text.lower()
        ident = (needle, case_sensitive)
        pid = self._ids.get(ident)
        if pid is None:
            pid = self._ids[ident] = self._new_id()
            self._plain[case_sensitive][needle] = (pid, len(needle), is_single_word(needle))
            self.plain_count += 1
        return pid

    def add_regex(self, key: RegexKey) -> int:
        ident = (key.pattern, "re")
        pid = self._ids.get(ident)
        if pid is None:
            pid = self._ids[ident] = self._new_id()
            self._regex.setdefault(key.flags, []).append((pid, key.pattern))
        return pid

    def _new_id(self) -> int:
        self._next += 1
        return self._next - 1

    @property
    def regex_count(self) -> int:
        return sum(len(v) for v in self._regex.values())

    def build(self) -> list[str]:
        """Compile the automata and sets; returns problems found (a refused regex is dropped)."""
        problems: list[str] = []
        for case_sensitive, words in self._plain.items():
            if not words:
                continue
            auto = ahocorasick.Automaton()
            for needle, info in words.items():
                auto.add_word(needle, info)
            auto.make_automaton()
            self._automata[case_sensitive] = auto
        for flags, patterns in sorted(self._regex.items()):
            rset = re2.Set.SearchSet(regex_options())
            ids: list[int] = []
            for pid, pattern in patterns:
                try:
                    rset.Add(pattern)
                except re2.error as exc:
                    problems.append(f"regex {pattern!r} refused by the RE2 set: {exc}")
                    continue
                ids.append(pid)
            if not ids:
                continue
            try:
                rset.Compile()
            except re2.error as exc:
                problems.append(f"RE2 set for flags {flags!r} failed to compile: {exc}")
                continue
            self._sets.append((rset, ids))
        return problems

    def match(self, text: str, bit: int, sub: HitMap, word: HitMap, rx: HitMap) -> None:
        """OR `bit` into the hit maps for every key found in `text`.

        `sub`: found as a substring; `word`: found with word boundaries (single-word keys);
        `rx`: regex keys, tested on "\\x01" + text like SillyTavern's haystack parts.
        """
        lowered: str | None = None
        for case_sensitive, auto in self._automata.items():
            if case_sensitive:
                hay = text
            else:
                if lowered is None:
                    lowered = text.lower()
                hay = lowered
            for end, (pid, length, single) in auto.iter(hay):
                if not sub.get(pid, 0) & bit:
                    sub[pid] = sub.get(pid, 0) | bit
                if single and not word.get(pid, 0) & bit and bounded(hay, end - length + 1, end + 1):
                    word[pid] = word.get(pid, 0) | bit
        if self._sets:
            data = ("\x01" + text).encode("utf-8")
            for rset, ids in self._sets:
                for index in rset.Match(data) or ():
                    pid = ids[index]
                    rx[pid] = rx.get(pid, 0) | bit
