"""R6.3: a tool rule reads the call's arguments as compact JSON in the model's key order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evacore.rules import canonical_arguments

CASES = [
    ('{"path": "a.txt", "content": "x"}', '{"path":"a.txt","content":"x"}'),
    ('{ "b" : 1 ,\n  "a" : 2 }', '{"b":1,"a":2}'),
    (
        '{"z": {"y": [1, 2, {"x": null}], "w": true}, "a": false}',
        '{"z":{"y":[1,2,{"x":null}],"w":true},"a":false}',
    ),
    ('{"t": "\\u043f\\u0440\\u0438\\u0432\\u0435\\u0442"}', '{"t":"привет"}'),
    ('{"t": "ёлка 🎄", "ключ": 1}', '{"t":"ёлка 🎄","ключ":1}'),
    (
        '{"f": 1.0, "i": 1, "e": 1e5, "E": 2.5E-3, "n": -0.0}',
        '{"f":1.0,"i":1,"e":1e5,"E":2.5E-3,"n":-0.0}',
    ),
    ('{"big": 123456789012345678901234567890}', '{"big":123456789012345678901234567890}'),
    (
        '{"pi": 3.14159265358979323846264338327950288}',
        '{"pi":3.14159265358979323846264338327950288}',
    ),
    (
        '{"s": "line\\nnext\\t\\"q\\" \\\\ \\/ \\u0001"}',
        '{"s":"line\\nnext\\t\\"q\\" \\\\ / \\u0001"}',
    ),
    ('[1, "two", [3]]', '[1,"two",[3]]'),
    ('"just a string"', '"just a string"'),
    ("  42  ", "42"),
    ("{}", "{}"),
    ('{"a": 1, "a": 2, "b": 3}', '{"a":2,"b":3}'),
]


@pytest.mark.parametrize(("raw", "compact"), CASES)
def test_r6_3_arguments_become_compact_json(raw: str, compact: str) -> None:
    assert canonical_arguments(raw) == compact


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "",
        "   ",
        "{'a': 1}",
        '{"a": 1',
        '{"a": 1} trailing',
        "NaN",
        '{"a": Infinity}',
        '{"a": "\\ud800"}',
        '{"a": "raw\ncontrol"}',
        "\ufeff{}",
    ],
)
def test_r6_3_invalid_json_is_matched_as_the_raw_string(raw: str) -> None:
    assert canonical_arguments(raw) == raw


def test_r6_3_absurdly_deep_json_falls_back_to_raw_without_crashing() -> None:
    raw = "[" * 100_000 + "]" * 100_000
    assert canonical_arguments(raw) == raw


def test_r6_3_already_parsed_arguments_are_serialized_compactly() -> None:
    assert canonical_arguments({"b": [1, "ж"], "a": None}) == '{"b":[1,"ж"],"a":null}'  # type: ignore[arg-type]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_r6_3_any_pretty_printed_json_becomes_the_compact_form(value: object) -> None:
    pretty = json.dumps(value, indent=2, ensure_ascii=True)
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        compact.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not valid JSON text, kept raw
        assert canonical_arguments(pretty) == pretty
        return
    assert canonical_arguments(pretty) == compact
