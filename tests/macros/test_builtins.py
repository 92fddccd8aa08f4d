"""R2.2: the behaviour of each built-in macro (names, card fields, chat facts, utilities)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from evacore.macros import MacroEngine, MacroEnv


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{user}}", "Ann"),
        ("{{char}}", "Eva"),
        ("{{group}}", "Eva"),
        ("{{charIfNotGroup}}", "Eva"),
        ("{{groupNotMuted}}", "Eva"),
        ("{{notChar}}", "Ann"),
        ("{{model}}", "gpt-4o"),
        ("{{description}}", "Eva is kind to Ann."),
        ("{{charDescription}}", "Eva is kind to Ann."),
        ("{{personality}}", "curious"),
        ("{{scenario}}", "A quiet library."),
        ("{{persona}}", "Ann is a student."),
        ("{{mesExamples}}", "<START>\nAnn: hi\nEva: hello"),
        ("{{mesExamplesRaw}}", "<START>\nAnn: hi\nEva: hello"),
        ("{{systemPrompt}}", "You are Eva."),
        ("{{system}}", "You are Eva."),
        ("{{defaultSystemPrompt}}", "Write the next reply."),
        ("{{instructSystem}}", "Write the next reply."),
        ("{{charPrompt}}", "Stay in character as Eva."),
        ("{{charInstruction}}", "Keep it short."),
        ("{{charJailbreak}}", "Keep it short."),
        ("{{charDepthPrompt}}", "Eva remembers the rain."),
        ("{{charVersion}}", "1.2"),
        ("{{char_version}}", "1.2"),
        ("{{creatorNotes}}", "Made for tests."),
        ("{{greeting}}", "Hello, Ann!"),
        ("{{greeting::1}}", "Welcome back."),
        ("{{greeting::5}}", ""),
        ("{{lastMessage}}", "See you."),
        ("{{lastUserMessage}}", "Bye!"),
        ("{{lastCharMessage}}", "See you."),
        ("{{lastMessageId}}", "41"),
        ("{{firstIncludedMessageId}}", "7"),
        ("{{lastSwipeId}}", "3"),
        ("{{currentSwipeId}}", "2"),
        ("{{input}}", "What now?"),
        ("{{maxPrompt}}", "7000"),
        ("{{maxContext}}", "8192"),
        ("{{maxResponse}}", "1024"),
        ("{{lastGenerationType}}", "normal"),
        ("a{{newline}}b", "a\nb"),
        ("a{{newline::3}}b", "a\n\n\nb"),
        ("a{{space::2}}b", "a  b"),
        ("a{{noop}}b", "ab"),
        ("a{{// a comment\nover two lines}}b", "ab"),
        ("{{reverse:abc}}", "cba"),
        ("{{reverse::añ🙂}}", "🙂ña"),
        ("{{banned \"badword\"}}ok", "ok"),
    ],
)
def test_r2_2_builtin_value(engine: MacroEngine, env: MacroEnv, text: str, expected: str) -> None:
    assert engine.evaluate(text, env) == expected


def test_r2_2_group_names(engine: MacroEngine, env: MacroEnv) -> None:
    env.group_members = ["Eva", "Bo", "Cy"]
    env.muted_members = ["Bo"]
    assert engine.evaluate("{{group}}|{{groupNotMuted}}|{{notChar}}", env) == (
        "Eva, Bo, Cy|Eva, Cy|Bo, Cy, Ann"
    )


def test_r2_2_unset_optional_ids_are_empty(engine: MacroEngine) -> None:
    assert engine.evaluate("[{{lastMessageId}}][{{maxPrompt}}][{{outlet::x}}]", MacroEnv()) == "[][][]"


def test_r2_2_original_expands_once(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{original}} + {{original}}", env) == "Default prompt for Eva. + "
    # a new evaluation (another prompt element) may expand it again
    assert engine.evaluate("{{original}}", env) == "Default prompt for Eva."


def test_r2_2_trim_removes_adjacent_newlines_only(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("a\n\n{{trim}}\r\n b", env) == "a b"
    assert engine.evaluate("x  {{trim}}  y", env) == "x    y"


def test_r2_2_comment_is_never_evaluated(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{// {{setvar::z::1}} }}{{getvar::z}}", env) == ""
    assert "z" not in env.local_vars


def test_r2_2_outlet_inserts_lorebook_text(engine: MacroEngine, env: MacroEnv) -> None:
    env.outlets["weather"] = "It rains on {{char}}."
    assert engine.evaluate("[{{outlet::weather}}][{{outlet::none}}]", env) == "[It rains on Eva.][]"


def test_r2_2_banned_collects_words(engine: MacroEngine, env: MacroEnv) -> None:
    engine.evaluate('{{banned "foo"}}{{banned::bar}}', env)
    assert env.banned == ["foo", "bar"]


def test_r2_2_instruct_macros_read_the_template(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("[{{instructInput}}]", env) == "[]"
    env.instruct = {"input_sequence": "<|user|>", "output_sequence": "<|bot|>",
                    "stop_sequence": "</s>", "chat_start": "***", "example_separator": "---"}
    out = engine.evaluate(
        "{{instructInput}}{{instructUserPrefix}}{{instructOutput}}{{instructStop}}"
        "{{chatStart}}{{chatSeparator}}{{exampleSeparator}}", env)
    assert out == "<|user|><|user|><|bot|></s>***------"


def test_r2_2_random_forms(engine: MacroEngine) -> None:
    env = MacroEnv(rng=random.Random(3))
    seen = Counter(engine.evaluate("{{random::a:: b ::c}}", env) for _ in range(200))
    assert set(seen) == {"a", "b", "c"}
    seen = Counter(engine.evaluate("{{random:x\\,y, z}}", env) for _ in range(100))
    assert set(seen) == {"x,y", "z"}
    seen = Counter(engine.evaluate("{{random one,two}}", env) for _ in range(100))
    assert set(seen) == {"one", "two"}
    seen = Counter(engine.evaluate("{{random::{{user}},{{char}}}}", MacroEnv(
        user="U", char="C", rng=random.Random(5))) for _ in range(50))
    assert set(seen) <= {"U", "C"}


def test_r2_2_pick_is_stable_per_chat_text_and_position(engine: MacroEngine) -> None:
    text = "{{pick::a::b::c::d::e::f}} {{pick::a::b::c::d::e::f}}"
    first = engine.evaluate(text, MacroEnv(chat_id="chat-A", rng=random.Random(1)))
    again = engine.evaluate(text, MacroEnv(chat_id="chat-A", rng=random.Random(2)))
    assert first == again
    picks = {engine.evaluate(text, MacroEnv(chat_id=f"chat-{i}")) for i in range(30)}
    assert len(picks) > 5  # other chats pick differently
    positions = {engine.evaluate(text, MacroEnv(chat_id=f"c{i}")).split()[0] for i in range(30)}
    assert len(positions) > 1


@pytest.mark.parametrize(
    ("formula", "low", "high"),
    [("d20", 1, 20), ("2d6+1", 3, 13), ("6", 1, 6), ("3d4-2", 1, 10), ("1D8", 1, 8)],
)
def test_r2_2_roll_ranges(engine: MacroEngine, formula: str, low: int, high: int) -> None:
    env = MacroEnv(rng=random.Random(11))
    values = {int(engine.evaluate(f"{{{{roll::{formula}}}}}", env)) for _ in range(300)}
    assert min(values) == low and max(values) == high


def test_r2_2_roll_legacy_forms_and_invalid(engine: MacroEngine) -> None:
    env = MacroEnv(rng=random.Random(1))
    assert 1 <= int(engine.evaluate("{{roll:d20}}", env)) <= 20
    assert 3 <= int(engine.evaluate("{{roll 2d6+1}}", env)) <= 13
    assert engine.evaluate("[{{roll::banana}}][{{roll::0d6}}][{{roll::5000d6}}]", env) == "[][][]"


def test_r2_2_trim_inside_an_argument_is_not_stored(engine: MacroEngine, env: MacroEnv) -> None:
    engine.evaluate("{{setvar::k::a\n{{trim}}\nb}}", env)
    assert env.local_vars["k"] == "a\n\nb"
