"""R2.2: parsing, order, nesting, unknown macros and plugin macros."""

from __future__ import annotations

import random

import pytest

from evacore.macros import MacroEngine, MacroEnv
from evacore.macros._parser import MAX_DEPTH, Macro, Text, parse


def test_r2_2_nested_macro_resolves_inside_out(engine: MacroEngine, env: MacroEnv) -> None:
    out = engine.evaluate("{{setvar::x::{{random::a,b}}}}[{{getvar::x}}]", env)
    assert out in ("[a]", "[b]")
    assert env.local_vars["x"] == out[1]


def test_r2_2_left_to_right_setvar_then_getvar_same_line(
    engine: MacroEngine, env: MacroEnv
) -> None:
    assert engine.evaluate("{{setvar::x::1}}{{getvar::x}}", env) == "1"


def test_r2_2_unknown_macro_stays_exactly_as_written(engine: MacroEngine, env: MacroEnv) -> None:
    text = "{{Unknown::{{setvar::y::1}}:: spaced }} and {{#if x}}yes{{/if}} {{ }}{{}}"
    assert engine.evaluate(text, env) == text
    assert "y" not in env.local_vars  # nothing inside an unknown macro ran


def test_r2_2_bad_argument_count_stays_verbatim(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{setvar}} {{user::x}} {{roll}}", env) == "{{setvar}} {{user::x}} {{roll}}"


def test_r2_2_unclosed_and_stray_braces_are_literal(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("a {{user and }} b {{char}}", env) == "a {{user and }} b Eva"
    assert engine.evaluate("{{ {{user}}", env) == "{{ Ann"


def test_r2_2_triple_braces_keep_the_outer_brace(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{{user}}}", env) == "{Ann}"


def test_r2_2_escaped_braces_are_literal(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate(r"\{\{user\}\} is {{user}}", env) == "{{user}} is Ann"


def test_r2_2_names_are_case_insensitive(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{User}} {{CHAR}} {{Char}}", env) == "Ann Eva Eva"


def test_r2_2_legacy_markers(engine: MacroEngine, env: MacroEnv) -> None:
    out = engine.evaluate("<USER>, <BOT>, <CHAR>, <GROUP>, <CharIfNotGroup>, <other>", env)
    assert out == "Ann, Eva, Eva, Eva, Eva, <other>"


def test_r2_2_variables_persist_across_two_turns(engine: MacroEngine) -> None:
    local: dict[str, object] = {}
    global_: dict[str, object] = {}
    turn1 = MacroEnv(local_vars=local, global_vars=global_)
    engine.evaluate("{{setvar::mood::happy}}{{incvar::count}}{{incglobalvar::visits}}", turn1)
    saved_local, saved_global = dict(local), dict(global_)
    turn2 = MacroEnv(local_vars=saved_local, global_vars=saved_global)
    out = engine.evaluate("{{getvar::mood}} {{incvar::count}} {{getglobalvar::visits}}", turn2)
    assert out == "happy 2 1"
    assert saved_local == {"mood": "happy", "count": 2}


def test_r2_2_card_field_text_is_expanded(engine: MacroEngine, env: MacroEnv) -> None:
    assert engine.evaluate("{{description}}", env) == "Eva is kind to Ann."


def test_r2_2_self_referencing_field_terminates(engine: MacroEngine, env: MacroEnv) -> None:
    env.description = "x{{description}}"
    out = engine.evaluate("{{description}}", env)
    assert out.startswith("xxxx") and out.endswith("{{description}}")


def test_r2_2_plugin_macro_registration(env: MacroEnv) -> None:
    engine = MacroEngine()
    engine.register("shout", lambda e, text: text.upper() + "!", description="Upper-case.",
                    min_args=1, max_args=1)
    assert engine.evaluate("{{shout::{{user}}}}", env) == "ANN!"
    assert engine.get("SHOUT") is not None
    engine.unregister("shout")
    assert engine.evaluate("{{shout::x}}", env) == "{{shout::x}}"


def test_r2_2_caller_extra_macros(engine: MacroEngine, env: MacroEnv) -> None:
    env.extra["weather"] = "rain over {{char}}"
    assert engine.evaluate("{{Weather}}", env) == "rain over Eva"


def test_r2_2_text_without_macros_is_returned_unchanged(engine: MacroEngine) -> None:
    text = "plain text with { single } braces and a <tag>"
    assert engine.evaluate(text, MacroEnv()) == text


def test_r2_2_deep_nesting_is_bounded() -> None:
    text = "{{" * (MAX_DEPTH + 50) + "x" + "}}" * (MAX_DEPTH + 50)
    nodes = parse(text)
    depth, node = 0, nodes[0]
    while isinstance(node, Macro) and node.body:
        depth += 1
        node = next((n for n in node.body if isinstance(n, Macro)), Text(""))
    assert depth <= MAX_DEPTH + 1
    MacroEngine().evaluate(text, MacroEnv())  # must not blow the recursion limit


def test_r2_2_pathological_unclosed_input_is_linear() -> None:
    text = "{{" * 50_000
    assert MacroEngine().evaluate(text, MacroEnv()) == text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_r2_2_seeded_rng_makes_random_reproducible(engine: MacroEngine, seed: int) -> None:
    text = "{{random::a::b::c::d}}{{roll::d100}}"
    first = engine.evaluate(text, MacroEnv(rng=random.Random(seed)))
    second = engine.evaluate(text, MacroEnv(rng=random.Random(seed)))
    assert first == second
