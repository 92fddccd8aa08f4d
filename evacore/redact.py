"""The one redactor for every string that leaves the process: error messages, stored tour
diagnostics, log lines and API answers lose API keys, bearer tokens, secret header values
and URL query secrets.

It knows the actual secrets of every connection built in this process (`remember`, called
when a provider `Connection` is made) and also catches generic shapes: `Bearer …`, `Basic …`,
`sk-…`, `evc_…` tokens, `?key=…`-style query values and `user:password@` in URLs.

Must not: import anything from evacore (errors.py and every layer import this module), or
keep secrets anywhere but in this process's memory.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import orjson
import re2

MASK = "***"
MIN_SECRET = 6
"""Shorter values are not replaced verbatim (they would garble ordinary text); the generic
shapes still apply to them."""
_MAX_KNOWN = 4096

_WORDS = r"key|token|secret|auth(?!ors?(?![a-z]))|passw|pwd|signature|credential|session"
_SECRET_NAME = re.compile(_WORDS + "|cookie", re.IGNORECASE)
_TOKEN = r"[A-Za-z0-9._~+/=\-]"
_TAIL = r"[A-Za-z0-9_\-]"
# (a literal that must be in the text, the shape; `head` is kept, the rest masked). Each
# shape starts with a literal or a small character class, which the regex engine finds
# fast, and runs only when its literal is in the text; the word boundary before a prefix
# is checked in `_mask_tail`.
_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    # a scheme and a token of 8+ characters with a digit in it (prose has none there)
    *((scheme, re.compile("(?P<head>" + scheme + r"\s+)(?=" + _TOKEN + r"*\d)" + _TOKEN
                          + "{8,}"))
      for scheme in ("Bearer", "bearer", "BEARER", "Basic", "basic", "BASIC")),
    *((prefix, re.compile("(?P<head>" + re.escape(prefix) + ")" + _TAIL + f"{{{least},}}"))
      for prefix, least in (("sk-", 6), ("xai-", 6), ("evc_", 6), ("gsk_", 20), ("ghp_", 20),
                            ("gho_", 20), ("hf_", 20), ("glpat-", 20), ("AIza", 20))),
    ("=", _QUERY := re.compile(
        r"(?P<head>[?&;][\w.\-]*(?:" + _WORDS + r")[\w.\-]*=)[^&#\s\"'<>;]+", re.IGNORECASE)),
    ("://", _USERINFO := re.compile(r"(?P<head>://[^/\s:@\"']+:)[^@\s/\"']+(?=@)")),
]
_SHORTEST = 6
"""No secret or shape fits in fewer characters."""
_LITERALS = re2.Set.SearchSet()
for _literal, _ in _SHAPES:
    _LITERALS.Add(re2.escape(_literal))
_LITERALS.Compile()
_ONE_PASS_FROM = 512
"""Shorter texts are scanned once per literal: RE2's call costs more than those scans."""
_SCHEME = re.compile(r"^\s*(?:bearer|basic|token)\s+", re.IGNORECASE)

_lock = threading.Lock()
_known: OrderedDict[str, None] = OrderedDict()
_known_re: tuple[re.Pattern[str], tuple[str, ...] | None] | None = None
"""The known secrets' pattern, and the probes that must be in a text for it to match (each
known form holds one of them): a few substring scans instead of the pattern's, which is
about ten times slower on a long text. No probes past _MAX_PROBED forms."""
_MAX_PROBED = 64


def is_secret_name(name: str) -> bool:
    """Whether a header or query parameter of this name carries a secret by its name
    (authorization, x-api-key, api-key, anything with key/token/secret/auth in it …)."""
    return bool(_SECRET_NAME.search(name))


def remember(secrets: Iterable[str | None]) -> None:
    """Make these values known: from now on they are replaced wherever they appear.
    Also their URL-encoded and JSON-escaped forms, and the token after a `Bearer `/`Basic `
    scheme."""
    global _known_re, _clean
    forms: list[str] = []
    for secret in secrets:
        if not isinstance(secret, str):
            continue
        secret = secret.strip()
        bare = _SCHEME.sub("", secret)
        escaped = orjson.dumps(bare).decode()[1:-1]  # as it stands inside a JSON text
        for form in {secret, bare, quote(secret, safe=""), quote(bare, safe=""), unquote(bare),
                     escaped}:
            if len(form) >= MIN_SECRET:
                forms.append(form)
    if not forms:
        return
    with _lock:
        changed = False
        for form in forms:
            if form in _known:
                _known.move_to_end(form)
            else:
                _known[form] = None
                changed = True
        while len(_known) > _MAX_KNOWN:
            _known.popitem(last=False)
        if changed:
            _clean = _Clean()  # known clean under the secrets known before
            ordered = sorted(_known, key=len, reverse=True)  # longest first: no half masks
            pattern = re.compile("|".join(re.escape(s) for s in ordered))
            _known_re = pattern, _probes(ordered) if len(ordered) <= _MAX_PROBED else None


def _probes(forms: list[str]) -> tuple[str, ...]:
    """The forms that hold no other form: one of them is in every text a form is in."""
    return tuple(f for f in forms if not any(o != f and o in f for o in forms))


def connection_secrets(
    api_key: str | None, base_url: str | None, params: Mapping[str, Any] | None
) -> list[str]:
    """The secrets one connection holds: its key, the values of its secret-looking extra
    headers, the secret query values and the password of its base URL."""
    out: list[str | None] = [api_key]
    headers = (params or {}).get("extra_headers")
    if isinstance(headers, Mapping):
        out += [str(v) for k, v in headers.items() if is_secret_name(str(k)) and v is not None]
    if base_url:
        out += [value for name, value in _query_pairs(base_url) if is_secret_name(name)]
        try:
            out.append(urlsplit(base_url).password)
        except ValueError:
            pass
    return [s for s in out if s]


def _mask_tail(m: re.Match[str]) -> str:
    start = m.start()
    if start and m.group("head")[0].isalnum() and (m.string[start - 1].isalnum()
                                                   or m.string[start - 1] == "_"):
        return m.group(0)  # `task-…` is not an `sk-…` key
    return m.group("head") + MASK


def redact(text: str) -> str:
    """`text` with every known secret and every secret-shaped token replaced by `***`."""
    if len(text) < _SHORTEST:
        return text
    known = _known_re
    if known is not None and (known[1] is None or any(p in text for p in known[1])):
        text = known[0].sub(MASK, text)
    for shape in _shapes_in(text):
        text = _sub_query(text) if shape is _QUERY else shape.sub(_mask_tail, text)
    return text


def _sub_query(text: str) -> str:
    """`_QUERY.sub(_mask_tail, text)`, tried only where a match can begin (at a `?`, `&` or
    `;`, found by `str.find`): the regex engine's own search for its first character class
    walks the whole text several times slower."""
    starts: list[int] = []
    for first in "?&;":
        at = text.find(first)
        while at >= 0:
            starts.append(at)
            at = text.find(first, at + 1)
    out: list[str] = []
    done = 0
    for at in sorted(starts):
        if at < done:
            continue  # inside the last match, as the engine's scan would skip it
        m = _QUERY.match(text, at)
        if m is not None:
            out += (text[done:at], _mask_tail(m))
            done = m.end()
    return "".join((*out, text[done:])) if out else text


def _shapes_in(text: str) -> list[re.Pattern[str]]:
    """The shapes whose literal is in `text` (a mask never brings one in: none holds `*`).
    A long text is searched for all the literals in one pass of RE2 over its UTF-8 (a
    literal is ASCII, so it is in the bytes exactly when it is in the text), not one scan
    per literal: a tour's diagnostics are several kilobytes, often not ASCII."""
    if len(text) >= _ONE_PASS_FROM:
        try:
            found = _LITERALS.Match(text)
        except UnicodeError:  # a lone surrogate has no UTF-8
            pass
        else:
            return [_SHAPES[i][1] for i in sorted(found)] if found else []
    return [shape for literal, shape in _SHAPES if literal in text]


def redact_value(value: Any) -> Any:
    """A copy of a JSON-like value with `redact` applied to every string in it (dict keys
    included); other values are kept as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    return value


def redact_json(value: Any) -> Any:
    """`redact_value` for a JSON document (stored diagnostics), done over its serialized
    text: several times faster on a large document. The value comes back as it was when
    nothing in it is secret; what JSON cannot hold takes `redact_value`.

    A large document is scanned in parts: a large list or object whose parts are all small
    (the tool definitions of a provider request, repeated by every tour) is scanned once and
    then known clean until a new secret is remembered, and so are the first parts of a list
    that begins as one known clean did (a chat's messages, which the next tour's request
    repeats with one or two more): only its new parts are scanned. The rest is scanned as
    one text. A secret or a shape found anywhere sends the whole document through the
    one-text scan, so what is masked never depends on the parts (a large document is not
    serialized whole unless that happens)."""
    if isinstance(value, dict | list):
        clean = _clean
        found = _Found()
        texts: list[bytes] = []
        try:
            _split(value, b"", clean, found, texts, root=True)
        except TypeError:
            return redact_value(value)
        if found.size >= _SPLIT_AT:
            text = b"\n".join(texts).decode()
            if redact(text) == text:
                _keep_clean(clean, found)
                return value
    try:
        raw = orjson.dumps(value)
    except TypeError:
        return redact_value(value)
    text = raw.decode()
    clean = redact(text)
    return value if clean == text else orjson.loads(clean)


_SPLIT_AT = 2048
"""A serialized list or object at least this long is split into its parts."""
_CLEAN_BYTES = 1 << 20
_CLEAN_LIST_BYTES = 4 << 20
_CLEAN_LISTS = 256
"""Lists remembered at most (each a chat's messages, say), and their bytes at most."""


class _Clean:
    """What was found clean under the secrets known now (a new one replaces the whole):
    serialized objects of small parts, and lists of small parts by their serialized text
    without the closing bracket, with how many parts they hold. The least recently used go
    first past the limits."""

    def __init__(self) -> None:
        self.objects: dict[bytes, None] = {}
        self.largest = 0
        """The longest object kept: a longer one (a request, split further) is not looked up,
        which would hash all its bytes."""
        self.lists: dict[bytes, int] = {}
        self.list_bytes = 0
        """The bytes of the lists' fronts kept."""
        self.heads: dict[bytes, dict[bytes, None]] = {}
        """The lists' fronts by their first `_HEAD` bytes, the most recently used last: a
        list is looked for only among those it could begin with (a chat's messages among
        that chat's, a list seen for the first time among none)."""

    def has_object(self, raw: bytes) -> bool:
        if len(raw) > self.largest:
            return False
        with _lock:  # `_keep_clean` may be counting the objects' bytes in another thread
            if raw not in self.objects:
                return False
            self.objects.pop(raw, None)  # the most recently used go last
            self.objects[raw] = None
        return True

    def clean_front(self, raw: bytes) -> int:
        """How many of the first parts of the list serialized as `raw` are known clean: those
        of the most recently used known list it begins with (its parts followed by `,`), or
        all of them when it is one."""
        size = len(raw)
        with _lock:  # another thread's scan may reorder the lists meanwhile
            fronts = self.heads.get(raw[:_HEAD])
            if not fronts:
                return 0
            for front in reversed(fronts):
                n = len(front)
                if n < size and raw[n] in _NEXT and raw.startswith(front):
                    parts = self.lists.pop(front)
                    self.lists[front] = parts
                    del fronts[front]
                    fronts[front] = None
                    return parts
        return 0

    def keep_list(self, front: bytes, parts: int) -> None:
        """Remember a clean list (the caller holds `_lock`), the least recently used going
        past `_CLEAN_LISTS` lists or `_CLEAN_LIST_BYTES` bytes."""
        if self.lists.pop(front, None) is None:
            self.list_bytes += len(front)
        self.lists[front] = parts
        fronts = self.heads.setdefault(front[:_HEAD], {})
        fronts.pop(front, None)
        fronts[front] = None
        while self.lists and (len(self.lists) > _CLEAN_LISTS
                              or self.list_bytes > _CLEAN_LIST_BYTES):
            gone = next(iter(self.lists))
            del self.lists[gone]
            self.list_bytes -= len(gone)
            head = self.heads[gone[:_HEAD]]
            del head[gone]
            if not head:
                del self.heads[gone[:_HEAD]]


_NEXT = (ord(","), ord("]"))
_HEAD = 64
"""The bytes a list's front is indexed by (every front kept is longer: only lists of at
least `_SPLIT_AT` bytes are split and remembered)."""
_clean = _Clean()


class _Found:
    """The containers of small parts a scan went through, to be known clean if it finds
    nothing: objects whole, lists with their part counts."""

    __slots__ = ("lists", "objects", "size")

    def __init__(self) -> None:
        self.objects: list[bytes] = []
        self.lists: list[tuple[bytes, int]] = []
        self.size = 0
        """The serialized size of the document's parts (its punctuation aside)."""


def _split(value: dict[str, Any] | list[Any], raw: bytes, clean: _Clean, found: _Found,
           texts: list[bytes], root: bool = False) -> None:
    """Add to `texts` the serialized parts of `value` to scan (keys included), splitting
    large ones further. A container of small parts only (not the document itself, which
    differs every time) is skipped when `clean` knows it, and a list's first parts when
    `clean` knows a list it begins with; it goes to `found` otherwise. A list of strings and
    numbers only goes to `texts` whole. No secret or shape spans two JSON tokens (none
    matches a quote), so scanning the parts finds what scanning `raw` finds."""
    start = 0
    if not root:
        if isinstance(value, dict):
            if clean.has_object(raw):
                return
        elif raw.count(b"[") == 1 and b"{" not in raw:
            # strings and numbers only (a change log's element ids, which grow with the
            # chat but not only at the end): no part to split, and the list's text is what
            # its parts are, with commas between. Scanned as one, in one pass of the
            # scanner, and not remembered: a part-by-part scan would cost a serialization a
            # part, and such a list would push the chats' messages out of the lists kept
            texts.append(raw)
            return
        else:
            start = clean.clean_front(raw)
            if start >= len(value):
                return
    parts: list[tuple[Any, bytes]] = []
    split = False
    pairs = value.items() if isinstance(value, dict) else (
        (None, item) for item in (value[start:] if start else value))
    for key, item in pairs:
        if key is not None:  # JSON's keys are strings
            texts.append(orjson.dumps(key))
        part = orjson.dumps(item)
        split = split or (len(part) >= _SPLIT_AT and isinstance(item, dict | list))
        parts.append((item, part))
    if root:
        found.size = sum(len(part) for _, part in parts)
    if not split:
        if not root:
            if isinstance(value, dict):
                found.objects.append(raw)
            else:
                found.lists.append((raw[:-1], len(value)))
        texts.extend(part for _, part in parts)
        return
    for item, part in parts:
        if len(part) >= _SPLIT_AT and isinstance(item, dict | list):
            _split(item, part, clean, found, texts)
        else:
            texts.append(part)


def _keep_clean(clean: _Clean, found: _Found) -> None:
    if not found.objects and not found.lists:
        return
    with _lock:
        if clean is not _clean:
            return  # a secret was remembered meanwhile: what was scanned is not known clean
        for part in found.objects:
            clean.objects[part] = None
            clean.largest = max(clean.largest, len(part))
        _bound(clean.objects, _CLEAN_BYTES, len(clean.objects))
        for front, parts in found.lists:
            clean.keep_list(front, parts)


def _bound(kept: dict[bytes, Any], most_bytes: int, most: int) -> None:
    """Drop the least recently used entries past `most` of them or `most_bytes` in all."""
    while len(kept) > most:
        del kept[next(iter(kept))]
    total = sum(len(k) for k in kept)
    while total > most_bytes and kept:
        oldest = next(iter(kept))
        total -= len(oldest)
        del kept[oldest]


def mask(secret: str | None) -> str | None:
    """The form an API answer shows of a secret: its last four characters, or `****`."""
    if not secret:
        return None
    return "…" + secret[-4:] if len(secret) >= 12 else "****"


def redact_headers(headers: Mapping[str, str], *, shown: Any = None) -> dict[str, str]:
    """Headers with secret-looking ones replaced (by `***`, or by `shown(value)`)."""
    out = {}
    for name, value in headers.items():
        if is_secret_name(str(name)):
            out[name] = MASK if shown is None else shown(value)
        else:
            out[name] = redact(value) if isinstance(value, str) else value
    return out


def _query_pairs(url: str) -> list[tuple[str, str]]:
    query = url.partition("?")[2].partition("#")[0]
    pairs = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if sep:
            pairs.append((unquote(name), unquote(value)))
    return pairs


def redact_url(url: str, *, shown: Any = None) -> str:
    """A URL with secret query values and a userinfo password replaced (by `***` or by
    `shown(value)`); everything else is kept exactly as written."""
    base, qmark, rest = url.partition("?")
    base = _USERINFO.sub(_mask_tail, base)
    if not qmark:
        return base
    query, hashmark, fragment = rest.partition("#")
    parts = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if sep and is_secret_name(unquote(name)):
            value = MASK if shown is None else str(shown(unquote(value)))
        parts.append(name + sep + value)
    return base + "?" + "&".join(parts) + (hashmark + fragment)


_PLAIN = (str, int, float, bool, type(None), dict, list, tuple)
_LOG_META = frozenset({"exc_info", "stack_info", "_record", "_from_structlog"})


def structlog_processor(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every string of the event (message, fields, a rendered
    traceback) redacted; other objects are logged as their redacted `repr`."""
    out = {}
    for key, value in event.items():
        if key in _LOG_META:
            out[key] = value
        elif isinstance(value, _PLAIN):
            out[key] = redact_value(value)
        else:
            out[key] = redact(repr(value))
    return out
