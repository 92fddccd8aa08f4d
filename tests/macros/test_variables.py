"""R2.2: local and global variable macros follow SillyTavern's semantics."""

from __future__ import annotations

import pytest

from evacore.macros import MacroEngine, MacroEnv


@pytest.mark.parametrize("scope", ["", "global"])
def test_r2_2_setvar_prints_nothing_and_getvar_reads(engine: MacroEngine, scope: str) -> None:
    env = MacroEnv()
    out = engine.evaluate(f"[{{{{set{scope}var::name::Lia}}}}][{{{{get{scope}var::name}}}}]", env)
    assert out == "[][Lia]"
    store = env.global_vars if scope else env.local_vars
    other = env.local_vars if scope else env.global_vars
    assert store == {"name": "Lia"} and other == {}


@pytest.mark.parametrize("scope", ["", "global"])
def test_r2_2_incvar_decvar_return_new_value(engine: MacroEngine, scope: str) -> None:
    env = MacroEnv()
    out = engine.evaluate(
        f"{{{{inc{scope}var::n}}}},{{{{inc{scope}var::n}}}},{{{{dec{scope}var::n}}}}", env
    )
    assert out == "1,2,1"


@pytest.mark.parametrize("scope", ["", "global"])
def test_r2_2_addvar_numbers_add_and_text_concatenates(engine: MacroEngine, scope: str) -> None:
    env = MacroEnv()
    g = scope
    out = engine.evaluate(
        f"{{{{set{g}var::n::2}}}}{{{{add{g}var::n::3.5}}}}{{{{get{g}var::n}}}}|"
        f"{{{{set{g}var::s::ab}}}}{{{{add{g}var::s::cd}}}}{{{{get{g}var::s}}}}|"
        f"{{{{add{g}var::fresh::x}}}}{{{{get{g}var::fresh}}}}|"
        f"{{{{set{g}var::m::5}}}}{{{{add{g}var::m::x}}}}{{{{get{g}var::m}}}}",
        env,
    )
    assert out == "5.5|abcd|x|5x"


def test_r2_2_addvar_pushes_onto_json_array(engine: MacroEngine) -> None:
    env = MacroEnv(local_vars={"list": '["a",1]'})
    assert engine.evaluate("{{addvar::list::b}}{{getvar::list}}", env) == '["a",1,"b"]'


def test_r2_2_getvar_unset_is_empty_and_numbers_normalise(engine: MacroEngine) -> None:
    env = MacroEnv(local_vars={"a": "05", "b": "1.50", "c": " 7 ", "d": "0x10", "e": "1e3"})
    assert engine.evaluate("[{{getvar::zz}}]{{getvar::a}},{{getvar::b}},{{getvar::c}},"
                           "{{getvar::d}},{{getvar::e}}", env) == "[]5,1.5,7,16,1000"


def test_r2_2_variable_names_are_case_sensitive(engine: MacroEngine) -> None:
    env = MacroEnv()
    assert engine.evaluate("{{setvar::X::1}}[{{getvar::x}}][{{getvar::X}}]", env) == "[][1]"


def test_r2_2_hasvar_and_deletevar(engine: MacroEngine) -> None:
    env = MacroEnv()
    out = engine.evaluate(
        "{{hasvar::k}} {{setvar::k::v}}{{varexists::k}} {{deletevar::k}}{{hasvar::k}} "
        "{{setglobalvar::g::1}}{{hasglobalvar::g}} {{flushglobalvar::g}}{{globalvarexists::g}}",
        env,
    )
    assert out == "false true false true false"


def test_r2_2_setvar_without_value_sets_empty(engine: MacroEngine) -> None:
    env = MacroEnv(local_vars={"k": "old"})
    assert engine.evaluate("{{setvar::k}}[{{getvar::k}}]", env) == "[]"


def test_r2_2_nested_variable_name(engine: MacroEngine) -> None:
    env = MacroEnv(user="Ann")
    out = engine.evaluate("{{setvar::mood_{{user}}::glad}}{{getvar::mood_Ann}}", env)
    assert out == "glad" and env.local_vars == {"mood_Ann": "glad"}


def test_r2_2_values_may_contain_double_colons_and_names_are_trimmed(
    engine: MacroEngine,
) -> None:
    env = MacroEnv()
    out = engine.evaluate("{{setvar:: t ::12::30}}{{getvar::t}}|{{addvar::t::::x}}{{getvar:: t}}",
                          env)
    assert out == "12::30|12::30::x"
