"""R5.2: the telegram_react tool hands the reaction to the tour's `telegram` service, an object
of the `TelegramChannel` protocol (a fake here: these tests cover the tool's side of that
protocol, not a Telegram channel)."""

from __future__ import annotations

import json

from evacore.agent.registry import run_tool
from evacore.agent.tools import default_registry
from evacore.agent.tools.telegram import TelegramChannel
from evacore.errors import ToolError


class FakeChannel:
    def __init__(self) -> None:
        self.reactions: list[tuple[str, int, str]] = []

    async def react(self, chat: str, message_id: int, emoji: str) -> None:
        if emoji == "🦄":
            raise ToolError("Telegram refused the reaction: REACTION_INVALID")
        self.reactions.append((chat, message_id, emoji))


async def react(ctx, **args: object) -> tuple[str, bool]:
    outcome = await run_tool(default_registry(), "telegram_react", json.dumps(args), ctx)
    return outcome.output, outcome.error


async def test_r5_2_react_hands_the_reaction_to_the_telegram_service(make_ctx) -> None:
    channel = FakeChannel()
    assert isinstance(channel, TelegramChannel)
    ctx = make_ctx("guest", frozenset({"telegram"}), services={"telegram": channel})
    assert await react(ctx, message_id=1234, emoji="👍") == ("reacted 👍 to #1234", False)
    assert channel.reactions == [("chat-1", 1234, "👍")]
    assert await react(ctx, message_id=1, emoji="🦄") == (
        "error: Telegram refused the reaction: REACTION_INVALID", True)


async def test_r5_2_react_only_in_telegram_tours(make_ctx) -> None:
    ctx = make_ctx("master", frozenset({"master"}), services={"telegram": FakeChannel()})
    output, error = await react(ctx, message_id=1, emoji="👍")
    assert error and output.startswith("error: unknown tool 'telegram_react'")
    ctx = make_ctx("master", frozenset({"telegram"}))
    assert await react(ctx, message_id=1, emoji="👍") == (
        "error: telegram is not available in this tour", True)
    assert await react(make_ctx("guest", frozenset({"telegram"}), services={
        "telegram": FakeChannel()}), message_id="#12", emoji="👍") == (
        "error: argument 'message_id' must be integer, got string", True)
