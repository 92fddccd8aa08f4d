"""Key and content syntax: `/pattern/flags` keys (JavaScript regex → RE2), whole-word rule,
decorator lines, inclusion-group lists.

Must not: scan a haystack (the matcher does) or decide activation (scan.py does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import re2

_REGEX_KEY = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
_WHITESPACE = re.compile(r"\s")
_GROUP_SPLIT = re.compile(r",\s*")
_HEX = frozenset("0123456789abcdefABCDEF")

# JavaScript's \s: RE2's \s lacks \v and every non-ASCII space.
_JS_SPACE = r"\t\n\x0b\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}"

KNOWN_DECORATORS: tuple[str, ...] = ("@@activate", "@@dont_activate")


class UnsupportedRegex(ValueError):
    """A JavaScript regex that RE2 cannot run (look-around, back-references, bad syntax)."""


@dataclass(frozen=True)
class RegexKey:
    pattern: str
    """The RE2 translation, flags inlined."""
    flags: str
    """Sorted JavaScript flags that matter here (`i`, `m`, `s`, `y`)."""
    source: str


def parse_regex_key(key: str) -> tuple[str, str] | None:
    """SillyTavern's test for a regex key: `/pattern/flags` with no unescaped `/` inside.

    Returns (JavaScript pattern, flags) or None for a plain key.
    """
    m = _REGEX_KEY.match(key)
    if not m:
        return None
    pattern, flags = m.group(1), m.group(2)
    if _UNESCAPED_SLASH.search(pattern):
        return None
    return pattern.replace("\\/", "/", 1), flags


def compile_regex_key(key: str) -> RegexKey | None:
    """Translate a regex key for RE2; None for a plain key; UnsupportedRegex if RE2 refuses it."""
    parsed = parse_regex_key(key)
    if parsed is None:
        return None
    pattern, flags = parsed
    translated = _js_to_re2(pattern, unicode="u" in flags)
    inline = "".join(f for f in "ims" if f in flags)
    body = f"(?{inline}){translated}" if inline else translated
    if "y" in flags:
        body = rf"\A(?:{body})"
    try:
        re2.compile(body, _options())
    except re2.error as exc:
        raise UnsupportedRegex(f"RE2 cannot compile {key!r}: {exc}") from exc
    return RegexKey(pattern=body, flags="".join(sorted(set(flags) & set("imsy"))), source=key)


def _options() -> re2.Options:
    opts = re2.Options()
    opts.log_errors = False
    opts.max_mem = 64 << 20
    return opts


def regex_options() -> re2.Options:
    return _options()


def _js_to_re2(src: str, *, unicode: bool) -> str:
    """Rewrite the JavaScript-only syntax RE2 reads differently; leave the rest as is."""
    out: list[str] = []
    i, n, in_class = 0, len(src), False
    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n:
            nxt = src[i + 1]
            if nxt == "u":
                if unicode and src.startswith("{", i + 2):
                    end = src.find("}", i + 3)
                    if end > 0 and all(h in _HEX for h in src[i + 3:end]):
                        out.append(r"\x{" + src[i + 3:end] + "}")
                        i = end + 1
                        continue
                hexpart = src[i + 2:i + 6]
                if len(hexpart) == 4 and all(h in _HEX for h in hexpart):
                    out.append(r"\x{" + hexpart + "}")
                    i += 6
                    continue
                out.append("u")
            elif nxt == "c" and i + 2 < n and src[i + 2].isalpha():
                out.append(r"\x{%x}" % (ord(src[i + 2]) % 32))
                i += 3
                continue
            elif nxt == "0" and not (i + 2 < n and src[i + 2].isdigit()):
                out.append(r"\x00")
            elif nxt == "s":
                out.append(_JS_SPACE if in_class else f"[{_JS_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_JS_SPACE}]")
            elif nxt.isdigit() or nxt == "k":
                raise UnsupportedRegex("back-references are not supported by RE2")
            elif nxt == "/":
                out.append("/")
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            if src.startswith("[^]", i):
                out.append(r"[\s\S]")
                i += 3
                continue
            in_class = True
            out.append(c)
            if src.startswith("[^", i):
                out.append("^")
                i += 1
            if i + 1 < n and src[i + 1] == "]":  # JavaScript: a leading ] closes an empty class
                raise UnsupportedRegex("an empty character class never matches")
            i += 1
            continue
        if c == "(" and src.startswith("(?<", i) and not src.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def is_single_word(key: str) -> bool:
    """Whole-word matching applies only to keys without inner whitespace."""
    return _WHITESPACE.search(key) is None


def is_word_char(ch: str) -> bool:
    """JavaScript's ASCII `\\w`."""
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("0" <= ch <= "9")


def bounded(text: str, start: int, end: int) -> bool:
    """Is text[start:end] flanked by a text edge or a non-word character on both sides?"""
    return (start == 0 or not is_word_char(text[start - 1])) and (
        end >= len(text) or not is_word_char(text[end])
    )


def find_plain(text: str, needle: str, whole_word: bool) -> bool:
    """Substring test, or the whole-word test of a single-word key, on already-cased text."""
    if not needle:
        return False
    if not whole_word or not is_single_word(needle):
        return needle in text
    start = text.find(needle)
    while start >= 0:
        if bounded(text, start, start + len(needle)):
            return True
        start = text.find(needle, start + 1)
    return False


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """Split leading `@@name` lines off the content (SillyTavern knows two decorators).

    An unknown decorator lets the next `@@@` line stand in for it; names are compared
    whole (`@@activate_only_every` is unknown, not `@@activate`). Returns (decorators,
    the text to insert).
    """
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    found: list[str] = []
    fallback = False
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            return tuple(found), "\n".join(lines[i:])
        if line.startswith("@@@") and not fallback:
            continue
        name = (line[1:] if line.startswith("@@@") else line).strip()
        if name.split(maxsplit=1)[0] in KNOWN_DECORATORS:
            found.append(name)
            fallback = False
        else:
            fallback = True
    return tuple(found), ""


def split_groups(group: str) -> tuple[str, ...]:
    """Inclusion groups are comma-separated; an entry may belong to several."""
    if not group:
        return ()
    return tuple(g for g in _GROUP_SPLIT.split(group) if g)
