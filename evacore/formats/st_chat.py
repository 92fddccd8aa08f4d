"""Read and write SillyTavern chat JSONL (header line, then one message per line).

Must not: store chats or build prompts; it maps lines to StChat and back, keeping every key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from evacore.errors import ImportInvalid, TooLarge
from evacore.formats._json import dump_compact, parse_json_text
from evacore.formats._st_dates import (
    format_create_date,
    format_iso,
    format_send_date,
    parse_st_date,
)
from evacore.formats.limits import DEFAULT_LIMITS, Limits

__all__ = ["StChat", "StMessage", "StVariant", "format_create_date", "parse_st_date",
           "read_st_chat", "write_st_chat"]

Role = Literal["user", "assistant", "system"]
_HEADER_KEYS = ("user_name", "character_name")
_MESSAGE_KEYS = ("name", "is_user", "is_system", "mes", "send_date", "extra", "swipes",
                 "swipe_id", "swipe_info")
_DATE_KEYS = ("send_date", "gen_started", "gen_finished")


@dataclass
class StVariant:
    """One swipe; dates come from its `swipe_info` entry (None when absent or unreadable)."""

    content: str
    send_date: datetime | None = None
    gen_started: datetime | None = None
    gen_finished: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """The swipe_info entry's `extra`."""
    other: dict[str, Any] = field(default_factory=dict)
    """Other swipe_info keys, and raw dates that could not be parsed."""
    raw_dates: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    has_info: bool = field(default=False, compare=False, repr=False)


@dataclass
class StMessage:
    """One chat line. `content` is `mes` (the active swipe's text)."""

    role: Role
    name: str
    content: str
    variants: list[StVariant]
    active_index: int = 0
    created_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """SillyTavern's message `extra` object."""
    is_hidden: bool = False
    """`is_system`: hidden from the prompt."""
    other: dict[str, Any] = field(default_factory=dict)
    """Every other top-level key (is_name, force_avatar, gen_started, …) and raw bad dates."""
    raw_send_date: Any = field(default=None, compare=False, repr=False)
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class StChat:
    """A chat file. `header` holds the header keys other than user_name/character_name."""

    header: dict[str, Any]
    user_name: str
    character_name: str
    messages: list[StMessage]
    has_header: bool = True
    """False for headerless files (SillyTavern group chats)."""


def _text(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]  # Chub exports wrap texts in {"message": …}
    if value is None:
        return ""
    return value if isinstance(value, str) else dump_compact(value)


def _dates(source: dict[str, Any], other: dict[str, Any],
           raw: dict[str, Any]) -> dict[str, datetime | None]:
    parsed: dict[str, datetime | None] = {}
    for key in _DATE_KEYS:
        if key not in source:
            parsed[key] = None
            continue
        parsed[key] = parse_st_date(source[key])
        if parsed[key] is None:
            other[key] = source[key]
        else:
            raw[key] = source[key]
    return parsed


def _variant(text: str, info: Any) -> StVariant:
    if not isinstance(info, dict):
        return StVariant(content=text, has_info=True)
    other = {k: v for k, v in info.items() if k not in _DATE_KEYS and k != "extra"}
    extra = info.get("extra")
    if extra is not None and not isinstance(extra, dict):
        other["extra"] = extra
    raw: dict[str, Any] = {}
    dates = _dates(info, other, raw)
    return StVariant(text, dates["send_date"], dates["gen_started"], dates["gen_finished"],
                     extra if isinstance(extra, dict) else {}, other, raw, True)


def _mirror(content: str, created_at: datetime | None, other: dict[str, Any]) -> StVariant:
    return StVariant(content, created_at, parse_st_date(other.get("gen_started")),
                     parse_st_date(other.get("gen_finished")))


def _capped_text(value: Any, line: int, cap: int, what: str) -> str:
    text = _text(value)
    if len(text) > cap:
        raise TooLarge(f"line {line}: {what} is {len(text)} characters; the limit is {cap}",
                       limit=cap, line=line)
    return text


def _message(obj: Any, line: int, cap: int) -> StMessage:
    if not isinstance(obj, dict):
        raise ImportInvalid(f"line {line}: a chat message must be a JSON object", line=line)
    if not any(key in obj for key in ("mes", "is_user", "swipes")):
        raise ImportInvalid(f"line {line} is not a chat message (no 'mes')", line=line)
    extra = obj.get("extra") or {}
    if not isinstance(extra, dict):
        raise ImportInvalid(f"line {line}: 'extra' must be an object", line=line)
    other = {k: v for k, v in obj.items() if k not in _MESSAGE_KEYS}
    content = _capped_text(obj.get("mes"), line, cap, "the message")
    raw_send_date = obj.get("send_date")
    created_at = parse_st_date(raw_send_date)
    if created_at is None and "send_date" in obj:
        other["send_date"] = raw_send_date
    swipes = obj.get("swipes")
    if isinstance(swipes, list) and swipes:
        texts = [_capped_text(s, line, cap, f"swipe {i + 1}") for i, s in enumerate(swipes)]
        infos = obj.get("swipe_info")
        if "swipe_info" in obj and not isinstance(infos, list):
            other["swipe_info"] = infos
        infos = infos if isinstance(infos, list) else []
        variants = [_variant(t, infos[i]) if i < len(infos) else StVariant(t)
                    for i, t in enumerate(texts)]
        active = obj.get("swipe_id")
        if isinstance(active, bool) or not isinstance(active, int) or not 0 <= active < len(texts):
            active = texts.index(content) if content in texts else 0
    else:
        for key in ("swipes", "swipe_id", "swipe_info"):
            if key in obj:
                other[key] = obj[key]
        variants, active = [_mirror(content, created_at, other)], 0
    is_user, is_hidden = bool(obj.get("is_user")), bool(obj.get("is_system"))
    role: Role = "user" if is_user else (
        "system" if is_hidden or extra.get("type") == "narrator" else "assistant")
    return StMessage(role, _text(obj.get("name")), content, variants, active, created_at,
                     dict(extra), is_hidden, other, raw_send_date, tuple(obj))


def _is_header(obj: Any) -> bool:
    return isinstance(obj, dict) and "mes" not in obj and (
        "user_name" in obj or "character_name" in obj or "chat_metadata" in obj)


def _lines(data: bytes, limits: Limits) -> Iterator[tuple[int, str]]:
    """(number, text) of each non-blank line, decoded one at a time; a line past
    `max_text_bytes` is refused before it is decoded."""
    cap = limits.max_text_bytes
    start, number, total = 0, 0, len(data)
    if data.startswith(b"\xef\xbb\xbf"):
        start = 3
    elif data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ImportInvalid("the chat file is UTF-16 text; only UTF-8 is accepted")
    while start <= total:
        end = data.find(b"\n", start)
        end = total if end < 0 else end
        number += 1
        if end - start > cap:
            raise TooLarge(f"chat line {number} is {end - start} bytes; the limit is {cap}",
                           limit=cap, line=number)
        raw = data[start:end]
        start = end + 1
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportInvalid(f"the chat file is not valid UTF-8 (line {number}, bad byte "
                                f"at offset {exc.start})", line=number) from None


def read_st_chat(data: bytes, limits: Limits | None = None) -> StChat:
    """Parse SillyTavern/TavernAI chat JSONL; a line that is not JSON raises with its number.

    Counts come first: more lines than `max_chat_messages` (plus the header), a line past
    `max_text_bytes` or a message or swipe past `max_message_chars` is TooLarge.
    """
    limits = limits or DEFAULT_LIMITS
    if len(data) > limits.max_input_bytes:
        raise TooLarge(f"the chat file is {len(data)} bytes; the limit is "
                       f"{limits.max_input_bytes}", limit=limits.max_input_bytes)
    _check_line_count(data.count(b"\n") + (not data.endswith(b"\n")), limits)
    rows: list[tuple[int, Any]] = []
    for number, line in _lines(data, limits):
        rows.append((number, parse_json_text(line, limits, f"chat line {number}")))
    if not rows:
        raise ImportInvalid("the chat file has no lines")
    header: dict[str, Any] = {}
    has_header = _is_header(rows[0][1])
    if has_header:
        header = dict(rows.pop(0)[1])
    messages = [_message(obj, number, limits.max_message_chars) for number, obj in rows]
    names = {key: header.pop(key, None) for key in _HEADER_KEYS}
    user = names["user_name"] if isinstance(names["user_name"], str) else _first_name(
        messages, "user")
    char = names["character_name"] if isinstance(names["character_name"], str) else _first_name(
        messages, "assistant")
    return StChat(header, user, char, messages, has_header)


def _check_line_count(lines: int, limits: Limits) -> None:
    """TooLarge when a chat file has more lines than its messages and header may take."""
    cap = limits.max_chat_messages
    if lines > cap + 1:
        raise TooLarge(f"the chat file has more than {cap} messages (lines); the limit is {cap}",
                       limit=cap)


def _first_name(messages: list[StMessage], role: Role) -> str:
    return next((m.name for m in messages if m.role == role), "")


def _date_value(moment: datetime | None, raw: Any, key: str = "send_date") -> Any:
    """A date as read back (its raw form when unchanged), else as SillyTavern writes it:
    `send_date` in its long local-time form, `gen_started`/`gen_finished` in ISO 8601."""
    if raw is not None and parse_st_date(raw) == moment:
        return raw
    if moment is None:
        return None
    return format_send_date(moment) if key == "send_date" else format_iso(moment)


def _variant_info(variant: StVariant) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for key in _DATE_KEYS:
        moment = getattr(variant, key)
        if moment is not None:
            info[key] = _date_value(moment, variant.raw_dates.get(key), key)
        elif key in variant.other:
            info[key] = variant.other[key]
    if variant.extra or "extra" not in variant.other:
        info["extra"] = variant.extra
    info.update({k: v for k, v in variant.other.items() if k not in info})
    return info


def _needs_info(variant: StVariant) -> bool:
    return variant.has_info or bool(
        variant.send_date or variant.gen_started or variant.gen_finished or variant.extra
        or variant.other)


def _message_object(message: StMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"name": message.name, "is_user": message.role == "user"}
    keys = set(message.key_order)
    extra = dict(message.extra)
    if message.role == "system" and not message.is_hidden and extra.get("type") != "narrator":
        extra["type"] = "narrator"
    native = not message.key_order  # not read from a file: written as SillyTavern does
    if message.is_hidden or "is_system" in keys or native:
        out["is_system"] = message.is_hidden
    if message.created_at is not None:
        out["send_date"] = _date_value(message.created_at, message.raw_send_date)
    out["mes"] = message.content
    mirror = [_mirror(message.content, message.created_at, message.other)]
    if message.variants != mirror or ("swipes" in keys and "swipes" not in message.other):
        out["swipes"] = [v.content for v in message.variants]
        out["swipe_id"] = message.active_index
        last = max((i for i, v in enumerate(message.variants) if _needs_info(v)), default=-1)
        if last >= 0 or ("swipe_info" in keys and "swipe_info" not in message.other):
            out["swipe_info"] = [_variant_info(v) for v in message.variants[: last + 1]]
    if extra or "extra" in keys or native:
        out["extra"] = extra
    for key, value in message.other.items():
        if key == "send_date" and message.created_at is not None:
            continue
        out.setdefault(key, value)
    rank = {key: index for index, key in enumerate(message.key_order)}
    return dict(sorted(out.items(), key=lambda item: rank.get(item[0], len(rank))))


def write_st_chat(chat: StChat) -> bytes:
    """JSONL as SillyTavern writes it: compact lines joined by "\\n", no trailing newline."""
    lines: list[str] = []
    if chat.has_header:
        header = {"user_name": chat.user_name, "character_name": chat.character_name}
        header.update({k: v for k, v in chat.header.items() if k not in header})
        lines.append(dump_compact(header))
    lines += [dump_compact(_message_object(m)) for m in chat.messages]
    return "\n".join(lines).encode("utf-8")
