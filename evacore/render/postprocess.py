"""Prompt post-processing for chat mode (R4, R12.7): SillyTavern's `mergeMessages` modes.

Must not: mutate the caller's messages (everything is deep-copied first), know about
providers (which mode a provider needs is the adapter's or the settings' business).
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evacore.errors import InvalidInput

__all__ = ["MODES", "postprocess_prompt"]


@dataclass(frozen=True)
class _Options:
    strict: bool = False
    placeholders: bool = False
    single: bool = False
    tools: bool = False


_MODE_OPTIONS: dict[str, _Options | None] = {
    "none": None,
    "": None,
    "merge": _Options(),
    "claude": _Options(),  # deprecated SillyTavern alias of `merge`
    "merge_tools": _Options(tools=True),
    "semi": _Options(strict=True),
    "semi_tools": _Options(strict=True, tools=True),
    "strict": _Options(strict=True, placeholders=True),
    "strict_tools": _Options(strict=True, placeholders=True, tools=True),
    "single": _Options(strict=True, single=True),
}

MODES: tuple[str, ...] = (
    "none",
    "merge",
    "semi",
    "strict",
    "single",
    "merge_tools",
    "semi_tools",
    "strict_tools",
)
"""The documented modes; `""` (= none) and `claude` (= merge) are accepted as aliases."""

_MEDIA_TYPES = frozenset({"image_url", "video_url", "audio_url"})


def is_known_mode(mode: str) -> bool:
    return mode in _MODE_OPTIONS


def postprocess_prompt(
    messages: list[dict],
    mode: str,
    *,
    char_name: str,
    user_name: str,
    group_names: Sequence[str] = (),
    placeholder: str = "Let's get started.",
) -> list[dict]:
    """Rebuild an OpenAI-format messages array the way SillyTavern's `mergeMessages` does.

    Returns a new list; the input list, its dicts and their content parts are never changed.
    `none` returns an equal deep copy; so does an unknown mode (SillyTavern passes the
    messages through for any mode it does not know; `is_known_mode` tells the caller).
    """
    _check_messages(messages)
    work = copy.deepcopy(list(messages))
    options = _MODE_OPTIONS.get(mode)
    if options is None:
        return work
    merger = _Merger(
        char_name=char_name or "",
        user_name=user_name or "",
        group_names=tuple(n for n in group_names if n),
        placeholder=placeholder,
    )
    return merger.merge(work, options)


def _check_messages(messages: object) -> None:
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise InvalidInput("messages must be a list of message objects")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"message {index} is not an object", index=index)
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InvalidInput(
                f"message {index} has content that is neither text nor a list of parts",
                index=index,
            )


class _Merger:
    """One post-processing run: holds the names and the media tokens of this run."""

    def __init__(
        self, *, char_name: str, user_name: str, group_names: tuple[str, ...], placeholder: str
    ) -> None:
        self.char_name = char_name
        self.user_name = user_name
        self.group_names = group_names
        self.placeholder = placeholder
        self.media: dict[str, Any] = {}
        self._token_re: re.Pattern[str] | None = None

    # -- names ---------------------------------------------------------------------------

    def _starts_with_group_name(self, text: str) -> bool:
        return any(text.startswith(f"{name}: ") for name in self.group_names)

    def _prefix(self, text: str, name: str) -> str:
        return text if text.startswith(f"{name}: ") else f"{name}: {text}"

    # -- media tokens --------------------------------------------------------------------

    def _token_for(self, part: Any) -> str:
        # NUL-delimited so a token can never contain the "\n\n" the restore step splits on.
        token = f"\x00media:{secrets.token_hex(12)}\x00"
        self.media[token] = part
        self._token_re = None
        return token

    def _flatten(self, content: Any) -> str:
        if not content:
            return ""
        if isinstance(content, str):
            return content
        pieces: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                text = part.get("text")
                pieces.append("" if text is None else str(text))
            elif kind in _MEDIA_TYPES:
                pieces.append(self._token_for(part))
            else:
                pieces.append("")
        return "\n\n".join(pieces)

    # -- the algorithm -------------------------------------------------------------------

    def merge(self, messages: list[dict], opts: _Options) -> list[dict]:
        for message in messages:
            self._normalise(message, opts)

        merged: list[dict] = []
        for message in messages:
            if merged and self._squashes_into(merged[-1], message, opts):
                self._squash(merged[-1], message, opts)
            else:
                merged.append(message)

        if not merged:
            merged.append({"role": "user", "content": self.placeholder})

        if self.media:
            for message in merged:
                self._restore_media(message)

        if not opts.strict:
            return merged

        for index, message in enumerate(merged):
            if index > 0 and message.get("role") == "system":
                message["role"] = "user"
        if merged and opts.placeholders:
            first_role = merged[0].get("role")
            if first_role == "system" and (len(merged) == 1 or merged[1].get("role") != "user"):
                merged.insert(1, {"role": "user", "content": self.placeholder})
            elif first_role not in ("system", "user"):
                merged.insert(0, {"role": "user", "content": self.placeholder})
        return self.merge(merged, _Options(placeholders=opts.placeholders, tools=opts.tools))

    def _normalise(self, message: dict, opts: _Options) -> None:
        text = self._flatten(message.get("content"))
        role = message.get("role")
        name = message.get("name")
        if (
            role == "system"
            and name == "example_assistant"
            and self.char_name
            and not text.startswith(f"{self.char_name}: ")
            and not self._starts_with_group_name(text)
        ):
            text = f"{self.char_name}: {text}"
        if role == "system" and name == "example_user" and self.user_name:
            text = self._prefix(text, self.user_name)
        if name and role != "system":
            text = self._prefix(text, str(name))
        if role == "tool" and not opts.tools:
            role = "user"
        if opts.single:
            if (
                role == "assistant"
                and self.char_name
                and not (
                    text.startswith(f"{self.char_name}: ") or self._starts_with_group_name(text)
                )
            ):
                text = f"{self.char_name}: {text}"
            if role == "user" and self.user_name:
                text = self._prefix(text, self.user_name)
            role = "user"
        message["content"] = text
        if "role" in message or role is not None:
            message["role"] = role
        message.pop("name", None)
        if not opts.tools:
            message.pop("tool_calls", None)
            message.pop("tool_call_id", None)

    @staticmethod
    def _squashes_into(previous: dict, incoming: dict, opts: _Options) -> bool:
        return (
            previous.get("role") == incoming.get("role")
            and bool(incoming.get("content"))
            and incoming.get("role") != "tool"
        )

    @staticmethod
    def _squash(previous: dict, incoming: dict, opts: _Options) -> None:
        previous["content"] = f"{previous.get('content') or ''}\n\n{incoming['content']}"
        # Deliberate divergence from SillyTavern: keep the incoming tool calls, in order.
        calls = incoming.get("tool_calls")
        if opts.tools and calls:
            previous["tool_calls"] = list(previous.get("tool_calls") or []) + list(calls)

    def _restore_media(self, message: dict) -> None:
        text = message.get("content")
        if not isinstance(text, str) or not any(token in text for token in self.media):
            return
        if self._token_re is None:
            self._token_re = re.compile("|".join(re.escape(t) for t in self.media))
        parts: list[Any] = []

        def add_text(chunk: str, joined: bool) -> None:
            if parts and isinstance(parts[-1], dict) and parts[-1].get("_text"):
                parts[-1]["text"] += ("\n\n" if joined else "") + chunk
            else:
                parts.append({"type": "text", "text": chunk, "_text": True})

        for chunk in text.split("\n\n"):
            if chunk in self.media:
                parts.append(self.media[chunk])
                continue
            # A token glued to other text (a name prefix before an image-first message):
            # SillyTavern leaks the token here; keep the media part instead.
            position, first = 0, True
            for match in self._token_re.finditer(chunk):
                before = chunk[position : match.start()]
                if before:
                    add_text(before, joined=first)
                    first = False
                parts.append(self.media[match.group(0)])
                position = match.end()
                first = False
            rest = chunk[position:]
            if rest or position == 0:
                add_text(rest, joined=first)
        message["content"] = [_strip_marker(part) for part in parts]


def _strip_marker(part: Any) -> Any:
    if isinstance(part, dict) and part.get("_text"):
        return {"type": "text", "text": part["text"]}
    return part
