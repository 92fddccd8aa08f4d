"""SillyTavern chat JSONL: legacy fixtures, a synthetic modern chat, dates, and bad lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evacore.errors import ImportInvalid
from evacore.formats.st_chat import (
    StMessage,
    StVariant,
    parse_st_date,
    read_st_chat,
    write_st_chat,
)
from tests.formats._build import FIXTURES

CHATS = sorted((FIXTURES / "chats").glob("*.jsonl"))


def _lines(*objects: object) -> bytes:
    return "\n".join(json.dumps(o, separators=(",", ":")) for o in objects).encode()


# Synthetic: no real modern chat is available (see fixtures/SOURCES.md). Shapes follow
# reference/formats.md §3.3.
SYNTHETIC_MODERN = [
    {"user_name": "Ann", "character_name": "Bot", "create_date": "2024-9-28 @17h 12m 33s 120ms",
     "chat_metadata": {"note_prompt": "Be brief", "note_depth": 4, "integrity": "u-1",
                       "variables": {"x": 1}}},
    {"name": "Bot", "is_user": False, "is_system": False, "send_date": "June 19, 2023 2:20pm",
     "mes": "Hello again", "swipes": ["Hello", "Hello again"], "swipe_id": 1, "swipe_info": [],
     "extra": {}},
    {"name": "Ann", "is_user": True, "is_system": False, "send_date": "1687184460000",
     "mes": "Hi \u00e9\U0001f600\r\nsecond line", "extra": {"bias": "", "isSmallSys": False},
     "force_avatar": "user.png"},
    {"name": "Bot", "is_user": False, "send_date": "2024-09-28T17:12:33.120Z", "mes": "B",
     "gen_started": "2024-09-28T17:12:30.000Z", "gen_finished": "2024-09-28T17:12:33.000Z",
     "swipes": ["A", "B", "C"], "swipe_id": 1,
     "swipe_info": [
         {"send_date": "2024-9-28 @17h 10m 01s 5ms", "gen_started": "2024-09-28T17:10:00.000Z",
          "gen_finished": "2024-09-28T17:10:01.000Z", "extra": {"api": "openai", "model": "m1"}},
         {"send_date": "2024-09-28T17:12:33.120Z", "extra": {"reasoning": "think",
                                                            "token_count": 12}},
     ],
     "extra": {"api": "openai", "model": "m1", "token_count": 12, "gen_id": 1727543553120}},
    {"name": "Narrator", "is_user": False, "is_system": False, "send_date": 1727543560000,
     "mes": "Time passes.", "extra": {"type": "narrator"}},
    {"name": "Ann", "is_user": True, "is_system": True, "send_date": "sometime last week",
     "mes": "hidden note", "extra": {}},
    {"name": "Bot", "is_user": False, "is_system": True, "send_date": "2024-9-28 @18h 00m 00s",
     "mes": "hidden reply", "extra": {}, "title": "legacy"},
]


def _synthetic() -> bytes:
    lines = [json.dumps(o, ensure_ascii=False) for o in SYNTHETIC_MODERN]
    lines.insert(3, "   ")
    return "\r\n".join(lines).encode("utf-8")


@pytest.mark.parametrize("path", CHATS, ids=lambda p: p.name)
def test_r8_2_legacy_tavernai_chats_read_and_write_back_byte_for_byte(path) -> None:
    raw = path.read_bytes()
    chat = read_st_chat(raw)
    assert chat.user_name == "You" and chat.header["create_date"] > 1_600_000_000_000
    [message] = chat.messages
    assert message.role == "assistant" and message.name == chat.character_name
    assert message.other == {"is_name": True}
    assert message.created_at is not None and message.created_at.year == 2023
    assert len(message.variants) == 1 and message.variants[0].content == message.content
    out = write_st_chat(chat)
    assert read_st_chat(out) == chat
    assert out == raw.rstrip(b"\n")


def test_r8_2_synthetic_modern_chat_maps_roles_swipes_and_dates() -> None:
    chat = read_st_chat(_synthetic())
    assert (chat.user_name, chat.character_name) == ("Ann", "Bot")
    assert chat.header["chat_metadata"]["integrity"] == "u-1" and "user_name" not in chat.header
    greeting, user, answer, narrator, hidden_user, hidden_bot = chat.messages
    assert [m.role for m in chat.messages] == [
        "assistant", "user", "assistant", "system", "user", "system"]
    assert greeting.active_index == 1 and [v.content for v in greeting.variants] == [
        "Hello", "Hello again"]
    assert greeting.created_at == datetime(2023, 6, 19, 14, 20, tzinfo=UTC)
    assert user.content.endswith("\r\nsecond line") and user.other == {"force_avatar": "user.png"}
    assert user.created_at == datetime(2023, 6, 19, 14, 21, tzinfo=UTC)
    assert answer.content == answer.variants[answer.active_index].content == "B"
    first, second, third = answer.variants
    assert first.send_date == datetime(2024, 9, 28, 17, 10, 1, 5000, tzinfo=UTC)
    assert first.gen_finished == datetime(2024, 9, 28, 17, 10, 1, tzinfo=UTC)
    assert first.extra == {"api": "openai", "model": "m1"}
    assert second.extra["reasoning"] == "think"
    assert (third.send_date, third.extra) == (None, {})
    assert answer.other["gen_started"] == "2024-09-28T17:12:30.000Z"
    assert answer.extra["gen_id"] == 1727543553120
    assert narrator.is_hidden is False and narrator.extra == {"type": "narrator"}
    assert hidden_user.is_hidden and hidden_user.created_at is None
    assert hidden_user.other == {"send_date": "sometime last week"}
    assert hidden_bot.is_hidden and hidden_bot.other == {"title": "legacy"}


def test_r8_2_synthetic_modern_chat_round_trips() -> None:
    chat = read_st_chat(_synthetic())
    out = write_st_chat(chat)
    assert read_st_chat(out) == chat
    written = [json.loads(line) for line in out.decode().split("\n")]
    assert written == SYNTHETIC_MODERN


def test_r8_2_edited_chat_writes_what_a_reader_gets_back() -> None:
    chat = read_st_chat(_synthetic())
    answer = chat.messages[2]
    answer.variants.append(StVariant("D", send_date=datetime(2025, 1, 1, tzinfo=UTC),
                                     extra={"model": "m2"}))
    answer.active_index, answer.content = 3, "D"
    # SillyTavern's send_date has minutes only: a time on the minute reads back the same
    moment = datetime(2025, 1, 2, 3, 4, tzinfo=UTC)
    chat.messages.append(StMessage("system", "System", "A note", [StVariant("A note")],
                                   created_at=moment))
    chat.messages[1].created_at = datetime(2020, 2, 2, tzinfo=UTC)
    out = write_st_chat(chat)
    last = json.loads(out.decode().split("\n")[-1])
    local = moment.astimezone()
    assert last["extra"] == {"type": "narrator"} and last["is_system"] is False
    assert last["send_date"] == f"January {local.day}, {local.year} {local.hour % 12 or 12}:04" \
        f"{'pm' if local.hour >= 12 else 'am'}"
    again = read_st_chat(out)
    assert again.messages[-1].role == "system" and not again.messages[-1].is_hidden
    chat.messages[-1].extra = {"type": "narrator"}  # how SillyTavern marks a visible system line
    assert again == chat


def test_r8_2_headerless_group_chat_stays_headerless() -> None:
    raw = _lines({"name": "A", "is_user": True, "mes": "hi"},
                 {"name": "B", "is_user": False, "mes": "yo"})
    chat = read_st_chat(raw)
    assert not chat.has_header and (chat.user_name, chat.character_name) == ("A", "B")
    assert len(chat.messages) == 2
    assert read_st_chat(write_st_chat(chat)) == chat and write_st_chat(chat) == raw


@pytest.mark.parametrize(("value", "expected"), [
    (1673181146000, datetime(2023, 1, 8, 12, 32, 26, tzinfo=UTC)),
    ("1673181146000", datetime(2023, 1, 8, 12, 32, 26, tzinfo=UTC)),
    ("January 8, 2023 11:39am", datetime(2023, 1, 8, 11, 39, tzinfo=UTC)),
    ("December 1, 2023 12:05am", datetime(2023, 12, 1, 0, 5, tzinfo=UTC)),
    ("June 19, 2023 12:20pm", datetime(2023, 6, 19, 12, 20, tzinfo=UTC)),
    ("2024-9-28 @17h 12m 33s 120ms", datetime(2024, 9, 28, 17, 12, 33, 120000, tzinfo=UTC)),
    ("2024-09-28@01h02m03s", datetime(2024, 9, 28, 1, 2, 3, tzinfo=UTC)),
    ("2024-01-02T03:04:05.678Z", datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
    ("2024-01-02T03:04:05+02:00", datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)),
    ("2024-01-02 03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("February 30, 2023 1:00pm", None),
    ("13h ago", None),
    ("", None),
    (None, None),
    (True, None),
    (1e300, None),
])
def test_r8_2_send_date_forms_seen_in_the_wild(value, expected) -> None:
    assert parse_st_date(value) == expected


@pytest.mark.parametrize(("payload", "needle"), [
    (b'{"user_name": "a", "character_name": "b"}\n{"name": "b", "mes": "x"}\n{"name": ',
     "chat line 3 is not valid JSON"),
    (b'{"user_name": "a"}\n\n[1, 2]', "line 3: a chat message must be a JSON object"),
    (b'{"user_name": "a"}\n{"name": "x"}', "line 2 is not a chat message"),
    (b'{"user_name": "a"}\n{"mes": "x", "extra": 5}', "line 2: 'extra' must be an object"),
    (b"\n  \n", "no lines"),
    (b'{"user_name": "Caf\xe9"}', "not valid UTF-8"),
])
def test_r8_2_bad_chat_lines_raise_with_their_line_number(payload, needle) -> None:
    with pytest.raises(ImportInvalid) as caught:
        read_st_chat(payload)
    assert needle in caught.value.message


_text = st.text(max_size=20) | st.sampled_from(["", "a\r\nb", "\u00e9\U0001f600"])
_date = st.none() | st.integers(0, 2**41) | st.sampled_from(
    ["June 19, 2023 2:20pm", "2024-9-28 @17h 12m 33s 120ms", "not a date", ""])
_info = st.fixed_dictionaries({"send_date": _date, "extra": st.dictionaries(_text, _text,
                                                                           max_size=2)})
_message = st.builds(
    lambda name, is_user, is_system, date, swipes, infos, pick, extra: {
        "name": name, "is_user": is_user, "is_system": is_system, "send_date": date,
        "mes": swipes[pick % len(swipes)] if swipes else name, "extra": extra,
        **({"swipes": swipes, "swipe_id": pick % len(swipes),
            "swipe_info": infos[: len(swipes)]} if swipes else {}),
    },
    _text, st.booleans(), st.booleans(), _date, st.lists(_text, max_size=3),
    st.lists(_info, max_size=3), st.integers(0, 5), st.dictionaries(_text, _text, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(messages=st.lists(_message, min_size=1, max_size=4), header=st.booleans())
def test_r8_2_generated_chats_round_trip(messages, header) -> None:
    lines = ([{"user_name": "U", "character_name": "C", "chat_metadata": {}}] if header else [])
    raw = "\n".join(json.dumps(line) for line in lines + messages).encode()
    chat = read_st_chat(raw)
    assert len(chat.messages) == len(messages) and chat.has_header == header
    assert read_st_chat(write_st_chat(chat)) == chat
    for message, source in zip(chat.messages, messages, strict=True):
        assert message.content == source["mes"]
        assert message.is_hidden == source["is_system"]
