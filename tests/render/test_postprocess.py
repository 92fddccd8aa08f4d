"""R4 / R12.7: prompt post-processing equals SillyTavern's mergeMessages (reference §1)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evacore.render.postprocess import MODES, is_known_mode, postprocess_prompt

P = "P"
NAMES = {"char_name": "Ann", "user_name": "Bob", "placeholder": P}


def run(messages: list[dict], mode: str, **overrides: object) -> list[dict]:
    kwargs = {**NAMES, **overrides}
    return postprocess_prompt(messages, mode, **kwargs)  # type: ignore[arg-type]


def sys(text: str, **kw: object) -> dict:
    return {"role": "system", "content": text, **kw}


def user(text: str, **kw: object) -> dict:
    return {"role": "user", "content": text, **kw}


def asst(text: str | None, **kw: object) -> dict:
    return {"role": "assistant", "content": text, **kw}


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}

# -- the reference's worked examples -------------------------------------------------------

EXAMPLE_1 = [
    sys("S"),
    sys("hi", name="example_user"),
    sys("yo", name="example_assistant"),
    user("Hello", name="Bob"),
    user("again"),
    asst("Hey"),
    sys("note"),
]


def test_r4_worked_example_merge_prefixes_names_and_squashes() -> None:
    assert run(EXAMPLE_1, "merge") == [
        sys("S\n\nBob: hi\n\nAnn: yo"),
        user("Bob: Hello\n\nagain"),
        asst("Hey"),
        sys("note"),
    ]


@pytest.mark.parametrize("mode", ["semi", "strict"])
def test_r4_worked_example_semi_and_strict_turn_late_system_into_user(mode: str) -> None:
    assert run(EXAMPLE_1, mode) == [
        sys("S\n\nBob: hi\n\nAnn: yo"),
        user("Bob: Hello\n\nagain"),
        asst("Hey"),
        user("note"),
    ]


def test_r4_worked_example_strict_inserts_placeholder_after_system() -> None:
    chat = [sys("S"), asst("g"), user("h")]
    assert run(chat, "strict") == [sys("S"), user(P), asst("g"), user("h")]
    assert run(chat, "semi") == chat


def test_r4_worked_example_strict_and_single_without_system() -> None:
    chat = [asst("g"), user("h")]
    assert run(chat, "strict") == [user(P), asst("g"), user("h")]
    assert run(chat, "single") == [user("Ann: g\n\nBob: h")]


def test_r4_worked_example_semi_merges_late_system_into_user() -> None:
    assert run([user("x"), sys("y")], "semi") == [user("x\n\ny")]


# -- each mode ------------------------------------------------------------------------------


def test_r4_none_passes_messages_through_as_an_equal_copy() -> None:
    chat = [sys("S"), user("a", name="Bob"), user("b"), {"role": "tool", "content": "r"}]
    out = run(chat, "none")
    assert out == chat
    assert out is not chat and out[1] is not chat[1]
    assert run(chat, "") == chat


def test_r4_unknown_mode_passes_the_messages_through_as_sillytavern_does() -> None:
    chat = [sys("s"), user("x"), user("y")]
    out = run(chat, "squash")
    assert out == chat and out is not chat
    assert not is_known_mode("squash") and all(is_known_mode(m) for m in MODES)


def test_r4_claude_is_the_deprecated_alias_of_merge() -> None:
    assert run(EXAMPLE_1, "claude") == run(EXAMPLE_1, "merge")


def test_r4_merge_never_merges_empty_messages() -> None:
    # An empty message stays on its own; the next text joins it, not the message before.
    chat = [user("a"), user(""), user("b"), asst(None), asst("")]
    assert run(chat, "merge") == [user("a"), user("\n\nb"), asst(""), asst("")]


def test_r4_empty_result_becomes_one_placeholder_user_message() -> None:
    assert run([], "merge") == [user(P)]
    assert postprocess_prompt([], "strict", char_name="A", user_name="B") == [
        user("Let's get started.")
    ]


def test_r4_strict_placeholder_after_lone_system() -> None:
    assert run([sys("S")], "strict") == [sys("S"), user(P)]
    assert run([sys("S")], "semi") == [sys("S")]


def test_r4_single_makes_everything_one_user_message() -> None:
    chat = [sys("S"), user("Bob: hi"), asst("Ann: yo"), asst("more"), sys("note")]
    assert run(chat, "single") == [user("S\n\nBob: hi\n\nAnn: yo\n\nAnn: more\n\nnote")]


def test_r4_single_skips_prefix_for_group_member_lines() -> None:
    chat = [asst("Cid: hello"), asst("plain")]
    assert run(chat, "single", group_names=["Cid", "Ann"]) == [user("Cid: hello\n\nAnn: plain")]


def test_r4_empty_names_add_no_prefixes() -> None:
    chat = [sys("hi", name="example_user"), sys("yo", name="example_assistant"), asst("g")]
    out = postprocess_prompt(chat, "single", char_name="", user_name="")
    assert out == [user("hi\n\nyo\n\ng")]


def test_r4_existing_name_prefixes_are_not_doubled() -> None:
    chat = [
        sys("Bob: hi", name="example_user"),
        sys("Ann: yo", name="example_assistant"),
        sys("Cid: hey", name="example_assistant"),
        user("Bob: Hello", name="Bob"),
    ]
    out = run(chat, "merge", group_names=["Cid"])
    assert out == [sys("Bob: hi\n\nAnn: yo\n\nCid: hey"), user("Bob: Hello")]


def test_r4_named_empty_message_becomes_name_colon() -> None:
    assert run([user("", name="Bob")], "merge") == [user("Bob: ")]


def test_r4_other_named_system_messages_lose_the_name() -> None:
    assert run([sys("x", name="Narrator")], "merge") == [sys("x")]


def test_r4_extra_keys_survive_and_merged_message_keeps_the_first_keys() -> None:
    chat = [asst("a", reasoning="r1"), asst("b", reasoning="r2", cache=True)]
    assert run(chat, "merge") == [asst("a\n\nb", reasoning="r1")]


# -- tools ---------------------------------------------------------------------------------

CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
TOOL_CHAT = [
    user("read it"),
    asst(None, tool_calls=[CALL]),
    {"role": "tool", "tool_call_id": "c1", "content": "file text"},
    asst("done"),
]


@pytest.mark.parametrize("mode", ["merge", "semi", "strict"])
def test_r4_non_tool_modes_flatten_tool_messages(mode: str) -> None:
    assert run(TOOL_CHAT, mode) == [user("read it"), asst(""), user("file text"), asst("done")]


@pytest.mark.parametrize("mode", ["merge_tools", "semi_tools", "strict_tools"])
def test_r4_tool_modes_keep_tool_calls_and_results(mode: str) -> None:
    assert run(TOOL_CHAT, mode) == [
        user("read it"),
        asst("", tool_calls=[CALL]),
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        asst("done"),
    ]


def test_r4_tool_results_are_never_squashed_together() -> None:
    chat = [
        asst("", tool_calls=[CALL, {**CALL, "id": "c2"}]),
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    assert run(chat, "merge_tools") == chat
    assert run(chat, "merge") == [asst(""), user("one\n\ntwo")]


def test_r4_text_merged_into_empty_tool_call_message_keeps_its_calls() -> None:
    chat = [asst(None, tool_calls=[CALL]), asst("thinking aloud")]
    assert run(chat, "merge_tools") == [asst("\n\nthinking aloud", tool_calls=[CALL])]


def test_r4_merged_assistant_keeps_both_messages_tool_calls() -> None:
    """Deliberate divergence: SillyTavern drops the second message's tool_calls."""
    second = {**CALL, "id": "c2"}
    chat = [asst("a", tool_calls=[CALL]), asst("b", tool_calls=[second])]
    assert run(chat, "merge_tools") == [asst("a\n\nb", tool_calls=[CALL, second])]


def test_r4_strict_tools_puts_placeholder_before_a_leading_tool_message() -> None:
    chat = [{"role": "tool", "tool_call_id": "c1", "content": "r"}, user("u")]
    assert run(chat, "strict_tools") == [user(P), *chat]


# -- media ---------------------------------------------------------------------------------


def test_r4_image_parts_are_preserved_through_merging() -> None:
    chat = [
        user([{"type": "text", "text": "look"}, IMAGE]),
        user("and this"),
        asst("nice"),
    ]
    assert run(chat, "merge") == [
        user([{"type": "text", "text": "look"}, IMAGE, {"type": "text", "text": "and this"}]),
        asst("nice"),
    ]


def test_r4_video_and_audio_parts_are_media_too() -> None:
    video = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AA"}}
    audio = {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,AA"}}
    out = run([user([video]), user([audio])], "merge")
    assert out == [user([video, audio])]


def test_r4_text_only_part_lists_become_strings_and_unknown_parts_vanish() -> None:
    chat = [
        user(
            [{"type": "text", "text": "a"}, {"type": "input_audio"}, {"type": "text", "text": "b"}]
        )
    ]
    assert run(chat, "merge") == [user("a\n\n\n\nb")]


def test_r4_name_prefix_on_image_first_message_keeps_the_image() -> None:
    """Deliberate divergence: SillyTavern leaks its media token into the text here."""
    chat = [user([IMAGE, {"type": "text", "text": "see?"}], name="Bob")]
    out = run(chat, "merge")
    assert out == [
        user([{"type": "text", "text": "Bob: "}, IMAGE, {"type": "text", "text": "see?"}])
    ]
    assert "\x00" not in repr(out)


def test_r4_single_keeps_images_in_the_one_user_message() -> None:
    chat = [asst("hello"), user([{"type": "text", "text": "pic"}, IMAGE])]
    assert run(chat, "single") == [
        user([{"type": "text", "text": "Ann: hello\n\nBob: pic"}, IMAGE]),
    ]


# -- never mutates --------------------------------------------------------------------------

_roles = st.sampled_from(["system", "user", "assistant", "tool"])
_text = st.text(alphabet=st.sampled_from("ab :\n"), max_size=6)
_part = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.just(IMAGE),
    st.just({"type": "input_audio", "input_audio": {"data": "x"}}),
)
_content = st.one_of(st.none(), _text, st.lists(_part, max_size=3))
_message = st.builds(
    lambda role, content, name, calls: {
        "role": role,
        "content": content,
        **({"name": name} if name else {}),
        **({"tool_calls": [CALL]} if calls and role == "assistant" else {}),
        **({"tool_call_id": "c1"} if role == "tool" else {}),
    },
    _roles,
    _content,
    st.sampled_from(["", "Bob", "Ann", "example_user", "example_assistant"]),
    st.booleans(),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(_message, max_size=7), mode=st.sampled_from(MODES))
def test_r12_7_postprocess_never_mutates_its_input(messages: list[dict], mode: str) -> None:
    before = copy.deepcopy(messages)
    out = postprocess_prompt(messages, mode, char_name="Ann", user_name="Bob", group_names=["Cid"])
    assert messages == before
    if mode == "none":
        assert out == before
    else:
        assert out, "post-processing never returns an empty prompt"
        assert "\x00" not in repr(out), "no media token may leak"
        if mode in ("semi", "strict", "single", "semi_tools", "strict_tools"):
            assert all(m.get("role") != "system" for m in out[1:])
        if mode == "single":
            assert all(m.get("role") == "user" for m in out)
        if not mode.endswith("_tools"):
            assert all("tool_calls" not in m and m.get("role") != "tool" for m in out)
        assert all("name" not in m for m in out)
