"""R2.2: parsing, order, nesting, unknown macros and plugin macros."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evacore.macros import MacroEngine, MacroEnv
from evacore.macros._parser import MAX_DEPTH, Macro, Text, parse
from evacore.macros.env import LazyRandom


def test_r2_2_nested_macro_resolves_inside_out(engine: MacroEngine, env: MacroEnv) -> None:
    out = engine.evaluate("{{setvar::x::{{random::a,b}}}}[{{getvar::x}}]", env)
    assert out in ("[a]", "[b]")
    assert env.local_vars["x"] == out[1]


def test_r2_2_left_to_right_setvar_then_getvar_same_line(
    engine: MacroEngine, env: MacroEnv
) -> None:
    assert engine.evaluate("{{setvar::x::1}}{{getvar::x}}", env) == "1"


def test_r2_2_unknown_macro_stays_as_written_with_nested_macros_resolved(
    engine: MacroEngine, env: MacroEnv
) -> None:
    text = "{{Unknown:: spaced }} {{ }}{{}} {{/if}} {{else}}"
    assert engine.evaluate(text, env) == text
    # SillyTavern's Macros 2.0: macros nested inside an unknown one are still resolved
    out = engine.evaluate("{{Unknown::{{setvar::y::1}}{{user}}:: spaced }}", env)
    assert out == "{{Unknown::Ann:: spaced }}"
    assert env.local_vars["y"] == "1"


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


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_lazy_random_draws_what_its_seeded_generator_would(engine: MacroEngine,
                                                             seed: int) -> None:
    made: list[random.Random] = []

    def make() -> random.Random:
        made.append(random.Random(seed))
        return made[-1]

    lazy = LazyRandom(make)
    assert engine.evaluate("plain {{char}}", MacroEnv(char="C", rng=lazy)) == "plain C"
    assert made == []  # nothing drew: no generator made
    text = "{{random::a::b::c::d}}{{roll::d100}}{{random::1::2::3}}"
    drawn = engine.evaluate(text, MacroEnv(rng=lazy))
    assert drawn == engine.evaluate(text, MacroEnv(rng=random.Random(seed)))
    assert len(made) == 1


def test_if_else_chooses_a_branch_and_evaluates_only_that_one(
    engine: MacroEngine, env: MacroEnv
) -> None:
    env.local_vars.update(mood="happy", zero="0", off="off")
    assert engine.evaluate("{{if .mood}} glad {{else}}sad{{/if}}", env) == "glad"
    assert engine.evaluate("{{if .zero}}yes{{else}}no{{/if}}", env) == "no"
    assert engine.evaluate("{{if .off}}yes{{else}}no{{/if}}", env) == "no"
    assert engine.evaluate("{{if !.missing}}none{{/if}}", env) == "none"
    assert engine.evaluate("{{if char}}named {{char}}{{/if}}", env) == "named Eva"
    assert engine.evaluate("{{if false}}x{{else}}{{user}}{{/if}}", env) == "Ann"
    # only the chosen branch runs: the other's setvar never happens
    engine.evaluate("{{if .mood}}ok{{else}}{{setvar::ran::1}}{{/if}}", env)
    assert "ran" not in env.local_vars
    # nesting, an else inside the inner block, and `#` keeping the whitespace
    assert engine.evaluate("{{if user}}{{if .zero}}a{{else}}b{{/if}}{{else}}c{{/if}}",
                           env) == "b"
    assert engine.evaluate("[{{#if 1}} keep {{/if}}]", env) == "[ keep ]"


def test_variable_shorthands_read_local_and_global_variables(
    engine: MacroEngine, env: MacroEnv
) -> None:
    env.local_vars["hp"] = 7
    env.global_vars["realm"] = "north"
    assert engine.evaluate("{{.hp}} in the {{$realm}}", env) == "7 in the north"
    assert engine.evaluate("{{if $realm}}{{$realm}}{{/if}}|{{.unset}}|", env) == "north||"


def test_scoped_comment_removes_its_body_unevaluated(engine: MacroEngine, env: MacroEnv) -> None:
    text = "a{{//}} hidden {{setvar::z::1}}\nlines {{///}}b {{// short}}c"
    assert engine.evaluate(text, env) == "ab c"
    assert "z" not in env.local_vars
    assert engine.evaluate("{{//}} never closed", env) == " never closed"


def test_scoped_form_passes_the_body_as_the_last_argument(
    engine: MacroEngine, env: MacroEnv
) -> None:
    assert engine.evaluate("{{reverse}}\n  abc\n{{/reverse}}", env) == "cba"


def test_a_text_evaluated_again_runs_its_macros_again(
    engine: MacroEngine, env: MacroEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parse of a text is kept between evaluations (every tour evaluates the same card
    texts); what the macros do still happens every time."""
    from evacore.macros import _parser

    parses: list[str] = []
    real_parse = _parser.parse
    monkeypatch.setattr(_parser, "parse", lambda source: parses.append(source) or real_parse(source))
    _parser._kept.cache_clear()
    text = "{{incvar::n}} {{user}} loves {{char}} <b>{{roll::1d1}}</b>"
    assert [engine.evaluate(text, env) for _ in range(3)] == [
        "1 Ann loves Eva <b>1</b>", "2 Ann loves Eva <b>1</b>", "3 Ann loves Eva <b>1</b>"]
    assert parses == [text]  # parsed once, evaluated three times
    env.user = "Bob"  # the same text with another environment: the parse is shared, not the output
    assert engine.evaluate(text, env) == "4 Bob loves Eva <b>1</b>"
    long = "{{user}} " * (_parser.KEPT_TEXT_CHARS // 9 + 1)
    assert engine.evaluate(long, env) == engine.evaluate(long, env) == "Bob " * (
        _parser.KEPT_TEXT_CHARS // 9 + 1)
    assert parses == [text, long, long]  # too long to keep: parsed each time


@pytest.mark.parametrize("closer", ["{{/if}}", "{{ /IF }}", "{{/If\t}}", "{{{/if}}}"])
def test_a_block_closes_however_its_closer_is_written(
    engine: MacroEngine, env: MacroEnv, closer: str
) -> None:
    """Blocks are looked for only when their closer is written in the text: every spelling
    the evaluator accepts as a closer is seen."""
    text = "{{char}} {{if {{getvar::flag}}}}yes{{else}}no" + closer + " {{user}}"
    env.local_vars["flag"] = "1"
    assert engine.evaluate(text, env).startswith("Eva yes")
    env.local_vars["flag"] = ""
    assert engine.evaluate(text, env).startswith("Eva no")


def test_a_text_without_closers_keeps_its_macros(engine: MacroEngine, env: MacroEnv) -> None:
    text = " ".join(["{{char}} and {{user}}"] * 200) + " {{if x}}open"
    assert engine.evaluate(text, env) == " ".join(["Eva and Ann"] * 200) + " {{if x}}open"


class _Everything:
    def __contains__(self, _: object) -> bool:
        return True


_PIECES = ["{{if 1}}", "{{if }}", "{{#if 1}}", "{{/if}}", "{{ /IF }}", "{{else}}", "{{char}}",
           "{{user}}", "{{//}}", "{{///}}", "{{// note}}", "{{trim}}", "a", " ", "\n", "{{",
           "}}", "\\{", "{{setvar::x::1}}", "{{getvar::x}}", "{{upper}}", "{{/upper}}",
           "{{noop}}", "{{/noop}}", "{{{/if}}}", "<user>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_looking_for_blocks_only_where_closers_are_written_changes_nothing(
    pieces: list[str]
) -> None:
    from evacore.macros import engine as engine_module

    text = "".join(pieces)
    engine = MacroEngine()

    def fresh() -> MacroEnv:
        return MacroEnv(user="Ann", char="Eva", rng=random.Random(1))

    quick = engine.evaluate(text, fresh())
    real = engine_module._closers
    engine_module._closers = lambda source: _Everything()  # type: ignore[assignment]
    try:
        assert engine.evaluate(text, fresh()) == quick
    finally:
        engine_module._closers = real


def test_a_block_around_a_macro_that_takes_no_text_is_no_block(
    engine: MacroEngine, env: MacroEnv
) -> None:
    """`{{user}}…{{/user}}`: `user` takes no argument, so there is no block to give it (a
    card written so must not fail every tour): each part is evaluated as written."""
    assert engine.evaluate("{{user}} and {{char}}{{/user}}!", env) == "Ann and Eva{{/user}}!"
    assert engine.evaluate("{{noop}}kept{{/noop}}", env) == "kept{{/noop}}"
    assert engine.evaluate("{{upper}}shout{{/upper}}", env) == "{{upper}}shout{{/upper}}"
