from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from evacore.macros import MacroEngine, MacroEnv

NOW = datetime(2026, 11, 30, 15, 5, 9, tzinfo=UTC)


@pytest.fixture(scope="session")
def engine() -> MacroEngine:
    return MacroEngine()


@pytest.fixture
def env() -> MacroEnv:
    return MacroEnv(
        user="Ann",
        char="Eva",
        description="{{char}} is kind to {{user}}.",
        personality="curious",
        scenario="A quiet library.",
        persona="{{user}} is a student.",
        mes_examples="<START>\nAnn: hi\nEva: hello",
        mes_examples_raw="<START>\n{{user}}: hi\n{{char}}: hello",
        system_prompt="You are {{char}}.",
        default_system_prompt="Write the next reply.",
        char_prompt="Stay in character as {{char}}.",
        char_instruction="Keep it short.",
        char_depth_prompt="Eva remembers the rain.",
        char_version="1.2",
        creator_notes="Made for tests.",
        greetings=["Hello, {{user}}!", "Welcome back."],
        original="Default prompt for {{char}}.",
        model="gpt-4o",
        chat_id="chat-1",
        last_message="See you.",
        last_user_message="Bye!",
        last_char_message="See you.",
        last_message_id=41,
        first_included_message_id=7,
        last_swipe_id=3,
        current_swipe_id=2,
        input="What now?",
        idle_since=NOW - timedelta(hours=3),
        max_prompt=7000,
        max_context=8192,
        max_response=1024,
        generation_type="normal",
        now=NOW,
        rng=random.Random(7),
    )
