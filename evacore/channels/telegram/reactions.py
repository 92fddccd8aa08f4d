"""The emoji Telegram allows as a bot's reaction (`ReactionTypeEmoji`), and the form of an
emoji the model wrote that Telegram takes (variation selectors dropped).

Must not: call Telegram; anything not on the list is refused before a request is made.
"""

from __future__ import annotations

ALLOWED: tuple[str, ...] = (
    "❤", "👍", "👎", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮",
    "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤‍🔥", "🌚", "🌭", "💯", "🤣", "⚡",
    "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻",
    "👨‍💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅",
    "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂", "🤷", "🤷‍♀",
    "😡",
)
"""Telegram's list of reaction emoji (Bot API, `ReactionTypeEmoji.emoji`)."""
_BY_KEY = {e.replace("\ufe0f", ""): e for e in ALLOWED}


def canonical_reaction(emoji: str) -> str | None:
    """The allowed reaction `emoji` stands for (`❤️` is `❤`), or None."""
    return _BY_KEY.get(emoji.strip().replace("\ufe0f", ""))
