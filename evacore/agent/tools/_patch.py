"""Apply a unified diff or search/replace blocks to a text, all or nothing (for `write_diff`).

Must not: do file I/O, or return a partly patched text: any hunk or block that does not
apply raises PatchFailed naming it and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evacore.errors import PatchFailed

_HUNK_RE = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+")
_SEARCH_RE = re.compile(r"^<{5,9} ?SEARCH\s*$")
_DIVIDER_RE = re.compile(r"^={5,9}\s*$")
_REPLACE_RE = re.compile(r"^>{5,9} ?REPLACE\s*$")
MAX_FUZZ = 2


@dataclass
class PatchResult:
    """The patched text and what happened, for the tool's answer."""

    text: str
    pieces: int
    added: int
    removed: int
    notes: list[str] = field(default_factory=list)


@dataclass
class _Hunk:
    header: str
    old_start: int | None
    old_count: int | None
    ops: list[tuple[str, str]] = field(default_factory=list)
    old_no_newline: bool = False
    new_no_newline: bool = False

    def old(self, fuzz_head: int = 0, fuzz_tail: int = 0) -> list[str]:
        return [t for tag, t in self._trimmed(fuzz_head, fuzz_tail) if tag != "+"]

    def merged(self, matched: list[str], head: int, tail: int) -> list[str]:
        """The new lines, with context lines as the file has them (a loose match keeps the file's)."""
        out, cursor = [], 0
        for tag, text in self._trimmed(head, tail):
            if tag == " ":
                out.append(matched[cursor])
            if tag != "+":
                cursor += 1
            else:
                out.append(text)
        return out

    def _trimmed(self, head: int, tail: int) -> list[tuple[str, str]]:
        return self.ops[head: len(self.ops) - tail]

    def edge_context(self) -> tuple[int, int]:
        head = next((i for i, (tag, _) in enumerate(self.ops) if tag != " "), len(self.ops))
        tail = next((i for i, (tag, _) in enumerate(reversed(self.ops)) if tag != " "), 0)
        return head, tail


def looks_like_search_replace(patch: str) -> bool:
    return any(_SEARCH_RE.match(line.rstrip("\r")) for line in patch.split("\n"))


def apply_patch(text: str, patch: str, shown: str) -> PatchResult:
    """Apply `patch` (search/replace blocks if it has any, else a unified diff) to `text`."""
    crlf = "\r\n" in text
    body = text.replace("\r\n", "\n") if crlf else text
    if looks_like_search_replace(patch):
        result = _apply_blocks(body, _parse_blocks(patch), shown)
    else:
        result = _apply_hunks(body, _parse_hunks(patch), shown)
    if crlf:
        result.text = result.text.replace("\n", "\r\n")
    return result


def _parse_hunks(diff: str) -> list[_Hunk]:
    lines = [line.rstrip("\r") for line in diff.split("\n")]
    hunks: list[_Hunk] = []
    current: _Hunk | None = None
    files = 0
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files += 1
            current = None
            continue
        if line.startswith("+++ ") and i > 0 and lines[i - 1].startswith("--- "):
            continue
        if line.startswith("@@"):
            match = _HUNK_RE.match(line)
            start = int(match.group(1)) if match else None
            count = int(match.group(2)) if match and match.group(2) is not None else None
            if match and count is None:
                count = 1
            current = _Hunk(header=line, old_start=start, old_count=count)
            hunks.append(current)
            continue
        if current is None:
            continue
        if line[:1] in (" ", "-", "+"):
            current.ops.append((line[0], line[1:]))
        elif line.startswith("\\"):
            last = current.ops[-1][0] if current.ops else " "
            current.old_no_newline |= last in (" ", "-")
            current.new_no_newline |= last in (" ", "+")
        elif line == "":
            current.ops.append((" ", ""))
        else:
            current = None
    if files > 1:
        raise PatchFailed("the diff changes more than one file; write_diff patches one file per call")
    for hunk in hunks:
        while hunk.ops and hunk.ops[-1] == (" ", ""):
            hunk.ops.pop()  # blank lines after a hunk are the diff's own line ends
        if not any(tag != " " for tag, _ in hunk.ops):
            raise PatchFailed(f"hunk {hunks.index(hunk) + 1} ({hunk.header}) changes nothing")
    if not hunks:
        raise PatchFailed("no hunks found: a unified diff needs '@@ -l,s +l,s @@' sections, "
                          "or send <<<<<<< SEARCH / ======= / >>>>>>> REPLACE blocks")
    return hunks


def _split(text: str) -> tuple[list[str], bool]:
    if text == "":
        return [], True  # lines added to an empty file end with a newline
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return lines, True
    return lines, False


def _join(lines: list[str], final_newline: bool) -> str:
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if final_newline else "")


def _find(lines: list[str], want: list[str], hint: int, start: int, loose: bool) -> int | None:
    """The position at or after `start` nearest to `hint` where `want` matches, or None."""
    last = len(lines) - len(want)
    if last < start:
        return None
    key = (lambda s: s.rstrip()) if loose else (lambda s: s)
    wanted = [key(w) for w in want]
    hint = min(max(hint, start), last)
    for distance in range(max(hint - start, last - hint) + 1):
        for pos in (hint - distance, hint + distance) if distance else (hint,):
            if start <= pos <= last and all(key(lines[pos + j]) == w for j, w in enumerate(wanted)):
                return pos
    return None


def _nearest(lines: list[str], want: list[str], start: int) -> str:
    """Describe the best partial match of `want`, to tell the model what went wrong."""
    best_pos, best_len = -1, 0
    for pos in range(start, len(lines)):
        n = 0
        while n < len(want) and pos + n < len(lines) and lines[pos + n].rstrip() == want[n].rstrip():
            n += 1
        if n > best_len:
            best_pos, best_len = pos, n
    if best_len == 0:
        return f"its first line {_clip(want[0])} is not in the file" + (
            f" at or after line {start + 1}" if start else "")
    if best_pos + best_len >= len(lines):
        return (f"file line {best_pos + 1} matches its first {best_len} line(s), "
                f"then the file ends where it expects {_clip(want[best_len])}")
    return (f"file line {best_pos + 1} matches its first {best_len} line(s), then it expects "
            f"{_clip(want[best_len])} but line {best_pos + best_len + 1} is "
            f"{_clip(lines[best_pos + best_len])}")


def _clip(line: str, limit: int = 80) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "…")


def _apply_hunks(text: str, hunks: list[_Hunk], shown: str) -> PatchResult:
    lines, final_newline = _split(text)
    notes: list[str] = []
    offset, start, added, removed = 0, 0, 0, 0
    for number, hunk in enumerate(hunks, 1):
        label = f"hunk {number} ({hunk.header})"
        header_pos = None
        if hunk.old_start is not None:  # a pure insertion's header names the line before it
            pure_insert = not hunk.old() and hunk.old_count == 0
            header_pos = hunk.old_start if pure_insert else max(hunk.old_start - 1, 0)
        if not hunk.old():
            if header_pos is None:
                raise PatchFailed(f"{label} has no context lines and no line number: "
                                  "cannot tell where to insert it")
            found, head, tail = min(max(header_pos + offset, start), len(lines)), 0, 0
        else:
            hint = header_pos + offset if header_pos is not None else start
            located, head, tail = _locate(lines, hunk, hint, start, notes, number)
            if located is None:
                raise PatchFailed(f"{label} does not apply to {shown}: "
                                  f"{_nearest(lines, hunk.old(), start)}; nothing was written")
            found = located
            if header_pos is not None and found - head != hint:
                notes.append(f"hunk {number} applied {abs(found - head - hint)} line(s) "
                             f"{'later' if found - head > hint else 'earlier'} than its header says")
        old, new = hunk.old(head, tail), hunk.merged(lines[found:], head, tail)
        at_eof = found + len(old) == len(lines)
        lines[found:found + len(old)] = new
        if at_eof and (hunk.old_no_newline or hunk.new_no_newline):
            final_newline = not hunk.new_no_newline
        if header_pos is not None:
            offset = found - head - header_pos + len(new) - len(old)
        start = found + len(new)
        added += sum(1 for tag, _ in hunk.ops if tag == "+")
        removed += sum(1 for tag, _ in hunk.ops if tag == "-")
    return PatchResult(_join(lines, final_newline or not lines), len(hunks), added, removed, notes)


def _locate(lines: list[str], hunk: _Hunk, hint: int, start: int, notes: list[str],
            number: int) -> tuple[int | None, int, int]:
    """Find a hunk: exact, then ignoring trailing spaces; then the same with up to MAX_FUZZ context
    lines dropped at either edge (like patch's fuzz factor), fewest first.
    Returns (position, dropped head, dropped tail)."""
    max_head, max_tail = hunk.edge_context()
    trims = sorted(((h, t) for h in range(min(MAX_FUZZ, max_head) + 1)
                    for t in range(min(MAX_FUZZ, max_tail) + 1)), key=lambda ht: (sum(ht), ht))
    for head, tail in trims:
        want = hunk.old(head, tail)
        if not want:
            continue
        for loose in (False, True):
            pos = _find(lines, want, hint + head, start, loose)
            if pos is not None:
                if loose:
                    notes.append(f"hunk {number} matched ignoring trailing whitespace")
                if head or tail:
                    notes.append(f"hunk {number} matched without {head + tail} context line(s)")
                return pos, head, tail
    return None, 0, 0


def _parse_blocks(patch: str) -> list[tuple[str, str]]:
    blocks: list[tuple[str, str]] = []
    state, search, replace = "out", [], []
    for line in (raw.rstrip("\r") for raw in patch.split("\n")):
        if state == "out" and _SEARCH_RE.match(line):
            state, search, replace = "search", [], []
        elif state == "search" and _DIVIDER_RE.match(line):
            state = "replace"
        elif state == "replace" and _REPLACE_RE.match(line):
            blocks.append(("\n".join(search), "\n".join(replace)))
            state = "out"
        elif state == "search":
            search.append(line)
        elif state == "replace":
            replace.append(line)
    if state != "out":
        closing = "=======" if state == "search" else ">>>>>>> REPLACE"
        raise PatchFailed(f"block {len(blocks) + 1} is not closed: '{closing}' is missing")
    return blocks


def _apply_blocks(text: str, blocks: list[tuple[str, str]], shown: str) -> PatchResult:
    notes: list[str] = []
    added = removed = 0
    for number, (search, replace) in enumerate(blocks, 1):
        label = f"block {number}"
        if search.strip() == "":
            raise PatchFailed(f"{label}: the SEARCH part is empty; write_diff edits an existing "
                              "file, use write_file to write a whole file")
        text, note = _replace_block(text, search, replace, label, shown)
        if note:
            notes.append(f"{label} {note}")
        removed += search.count("\n") + 1
        added += replace.count("\n") + 1 if replace else 0
    return PatchResult(text, len(blocks), added, removed, notes)


def _line_hits(lines: list[str], want: list[str], loose: bool) -> list[int]:
    key = (lambda t: t.rstrip()) if loose else (lambda t: t)
    wanted = [key(w) for w in want]
    return [p for p in range(len(lines) - len(want) + 1)
            if all(key(lines[p + j]) == w for j, w in enumerate(wanted))]


def _replace_block(text: str, search: str, replace: str, label: str,
                   shown: str) -> tuple[str, str]:
    """Replace whole lines matching SEARCH (exactly, then ignoring trailing whitespace), or else
    a unique substring. Returns the new text and a note on how it matched."""
    lines, final_newline = _split(text)
    want = search.strip("\n").split("\n")
    new = replace.strip("\n").split("\n") if replace.strip("\n") else []
    for loose in (False, True):
        hits = _line_hits(lines, want, loose)
        if len(hits) > 1:
            raise PatchFailed(f"{label}: the SEARCH text occurs {len(hits)} times in {shown}; "
                              "add surrounding lines so it matches once; nothing was written")
        if hits:
            lines[hits[0]:hits[0] + len(want)] = new
            return _join(lines, final_newline), "matched ignoring trailing whitespace" if loose else ""
    count = text.count(search)
    if count == 1:
        return text.replace(search, replace, 1), "matched inside a line"
    if count > 1:
        raise PatchFailed(f"{label}: the SEARCH text occurs {count} times in {shown}; "
                          "add surrounding text so it matches once; nothing was written")
    raise PatchFailed(f"{label}: the SEARCH text is not in {shown}: "
                      f"{_nearest(lines, want, 0)}; nothing was written")
