"""The `telegram_react` tool: set a reaction on a Telegram message of this tour's chat (R5.2, R9.1).

Must not: talk to Telegram itself; it calls the channel found in `ctx.services["telegram"]`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evacore.agent.registry import Tool, ToolContext
from evacore.errors import ToolError


@runtime_checkable
class TelegramChannel(Protocol):
    """What the Telegram channel offers the tool. `chat` is the tour's `chat_id`; the channel
    maps it to its Telegram chat. A refused reaction raises ToolError with Telegram's reason."""

    async def react(self, chat: str, message_id: int, emoji: str) -> None: ...


async def telegram_react(args: dict[str, Any], ctx: ToolContext) -> str:
    channel: TelegramChannel = ctx.service("telegram")
    message_id: int = args["message_id"]
    emoji: str = args["emoji"].strip()
    if message_id <= 0:
        raise ToolError("message_id is the number shown as #1234 in the chat")
    if not emoji or len(emoji) > 16:
        raise ToolError("emoji must be one reaction emoji, e.g. 👍")
    await channel.react(ctx.chat_id, message_id, emoji)
    return f"reacted {emoji} to #{message_id}"


def telegram_tool() -> Tool:
    """The `telegram_react` tool: any role, Telegram tours only."""
    return Tool(
        name="telegram_react",
        description=("Set a reaction emoji on a message of this Telegram chat, "
                     "given by the number shown as #1234 before it."),
        parameters={"type": "object", "properties": {
            "message_id": {"type": "integer", "description": "The message number, e.g. 1234."},
            "emoji": {"type": "string", "description": "One reaction emoji, e.g. 👍."},
        }, "required": ["message_id", "emoji"]},
        handler=telegram_react, roles=frozenset({"guest"}), kind="channel",
        requires_env=frozenset({"telegram"}), timeout=15.0,
    )
