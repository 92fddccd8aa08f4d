"""An incoming Telegram message as the model sees it (R14.2): `#<message_id> ` and its text
(in groups the sender's name too), a photo as an image for a vision connection or a text
marker for a blind one, a marker for voice and other media; and whether a group message
is meant for the bot (a mention of it, or a reply to it).

Must not: store anything or start tours; it reads the message (and fetches a photo).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiogram.methods import GetFile

from evacore.logs import get_logger

if TYPE_CHECKING:
    from aiogram.types import Message, User

    from evacore.channels.telegram.api import BotApi

log = get_logger(__name__)
GROUPS = ("group", "supergroup")
MAX_PHOTO_BYTES = 20 * 1024 * 1024
"""The Bot API's own download limit."""


@dataclass
class Incoming:
    """What a tour is asked to answer."""

    text: str
    images: list[str] = field(default_factory=list)


def sender_name(user: User | None) -> str:
    if user is None:
        return "someone"
    name = " ".join(p for p in (user.first_name, user.last_name) if p).strip()
    return name or (f"@{user.username}" if user.username else f"user {user.id}")


def body_of(message: Message) -> str:
    return message.text or message.caption or ""


def topic_of(message: Message) -> int | None:
    """The forum topic a supergroup message was written in (answers go there too)."""
    return message.message_thread_id if message.is_topic_message else None


def replied_to(message: Message) -> Message | None:
    """The message this one answers; None when it answers none. In a forum topic Telegram
    sends every message as a reply to the topic's first (service) message: that is where it
    was written, not a reply."""
    reply = message.reply_to_message
    if reply is None:
        return None
    if reply.forum_topic_created is not None or (
            message.is_topic_message and reply.message_id == message.message_thread_id):
        return None
    return reply


def command_of(message: Message, bot_username: str | None) -> str | None:
    """`new` for `/new` or `/new@<this bot>`; None for anything else (other bots' commands
    included)."""
    text = (message.text or "").strip()
    if not text.startswith("/"):
        return None
    head = text.split(maxsplit=1)[0][1:]
    name, _, target = head.partition("@")
    if target and (bot_username is None or target.casefold() != bot_username.casefold()):
        return None
    return name.casefold() or None


def addressed(message: Message, bot_id: int, bot_username: str | None) -> bool:
    """In a group: does the message mention the bot or reply to one of its messages? (Any
    message of a private chat is.)"""
    if message.chat.type not in GROUPS:
        return True
    reply = replied_to(message)
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot_id:
        return True
    text = body_of(message)
    entities = message.entities or message.caption_entities or []
    units = text.encode("utf-16-le")
    for e in entities:
        if e.type == "text_mention" and e.user is not None and e.user.id == bot_id:
            return True
        if e.type in ("mention", "bot_command") and bot_username:
            piece = units[e.offset * 2:(e.offset + e.length) * 2].decode("utf-16-le", "ignore")
            if piece.casefold().endswith("@" + bot_username.casefold()):
                return True
    return False


def _media_marker(message: Message) -> str | None:
    """A text marker for media the model cannot take as an image."""
    if message.voice is not None:
        return f"[voice message, {message.voice.duration} s, not transcribed]"
    if message.video_note is not None:
        return f"[round video message, {message.video_note.duration} s]"
    if message.audio is not None:
        title = " - ".join(p for p in (message.audio.performer, message.audio.title) if p)
        return f"[audio{': ' + title if title else ''}, {message.audio.duration} s]"
    if message.video is not None:
        return f"[video, {message.video.duration} s]"
    if message.animation is not None:
        return "[animation]"
    if message.sticker is not None:
        return f"[sticker {message.sticker.emoji or ''}]".replace(" ]", "]")
    if message.document is not None:
        return f"[file: {message.document.file_name or 'unnamed'}]"
    if message.location is not None:
        return f"[location: {message.location.latitude}, {message.location.longitude}]"
    if message.contact is not None:
        return f"[contact: {message.contact.first_name}]"
    if message.poll is not None:
        return f"[poll: {message.poll.question}]"
    return None


def heading(message: Message) -> str:
    """`#<id> ` and, in groups, the sender's name; a reply names the message it answers."""
    head = f"#{message.message_id} "
    if message.chat.type in GROUPS:
        head += f"{sender_name(message.from_user)}: "
    reply = replied_to(message)
    if reply is not None:
        head += f"(↩ #{reply.message_id}) "
    return head


async def read(message: Message, api: BotApi, *, vision: bool) -> Incoming | None:
    """The text (and image) a tour gets for `message`; None for a message with nothing to
    answer (no text, caption or media: a service message)."""
    head = heading(message)
    body = body_of(message)
    if message.photo:
        if not vision:
            marker = "[photo: this connection cannot see images, so it is not shown]"
            return Incoming((head + marker + (" " + body if body else "")).rstrip())
        largest = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        try:
            image = await _download(api, largest.file_id)
        except Exception as exc:  # noqa: BLE001 - the message still reaches the model
            log.warning("telegram.photo_unavailable", error=str(exc))
            marker = "[photo: it could not be downloaded]"
            return Incoming((head + marker + (" " + body if body else "")).rstrip())
        return Incoming((head + body).rstrip(), [image])
    marker = _media_marker(message)
    if marker is not None:
        return Incoming((head + marker + (" " + body if body else "")).rstrip())
    if not body.strip():
        return None
    return Incoming((head + body).rstrip())


async def _download(api: BotApi, file_id: str) -> str:
    """The file as a data URL (getFile, then the file route)."""
    file = await api.call(GetFile(file_id=file_id))
    if not file.file_path:
        raise ValueError("Telegram gave no file_path for the photo")
    if file.file_size and file.file_size > MAX_PHOTO_BYTES:
        raise ValueError("the photo is larger than the Bot API lets a bot download")
    data = await api.download(file.file_path)
    kind = "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "webp" if data[8:12] == b"WEBP" \
        else "jpeg"
    return f"data:image/{kind};base64,{base64.b64encode(data).decode()}"
