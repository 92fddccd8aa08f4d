"""Rule corpora: the JSON Lines format (bad lines named), and figures measured per rule."""

from __future__ import annotations

import pytest

from evacore.errors import InvalidInput
from evacore.rules import Rule, measure, parse_corpus, report_lines

TAIL = Rule(name="tail", scope="text", condition="END$", negate=True, when=("telegram",),
            text="End with END.")
SHELL = Rule(name="no_rm", scope="tool:shell", condition='"rm ', text="Careful with rm.")


def test_corpus_figures_count_misses_and_false_positives_per_rule() -> None:
    lines = [
        '{"rule": "tail", "expect": "catch", "text": "no tail"}',
        '{"rule": "tail", "expect": "catch", "text": "has END"}',
        '{"rule": "tail", "expect": "pass", "text": "fine END"}',
        '{"rule": "tail", "expect": "pass", "text": "outside telegram", "env": []}',
        '// a comment',
        '{"rule": "no_rm", "expect": "catch", "tool": "shell", "arguments": {"cmd": "rm -rf x"}}',
        '{"rule": "no_rm", "expect": "pass", "tool": "shell", "arguments": "{\\"cmd\\":\\"ls\\"}"}',
        '{"rule": "no_rm", "expect": "pass", "tool": "write_file", "arguments": {"c": "rm -rf"}}',
    ]
    samples = parse_corpus("\n".join(lines))
    tail, shell = measure([TAIL, SHELL], samples)
    assert (tail.caught, tail.catch_total, tail.false_positives, tail.pass_total) == (1, 2, 0, 2)
    assert [m.text for m in tail.misses] == ["has END"] and tail.catch_rate == 0.5
    assert (shell.caught, shell.false_positives, shell.false_positive_rate) == (1, 0, 0.0)
    lines = report_lines([tail, shell])
    assert lines[0] == "tail: caught 1/2 (50.0 %), false positives 0/2 (0.0 %)"
    assert lines[1] == "  missed (line 2): 'has END'"


def test_corpus_a_disabled_rule_is_measured_as_if_enabled_and_unknown_rules_are_named() -> None:
    samples = parse_corpus('{"expect": "catch", "text": "x"}', rule="tail")
    [score] = measure([Rule(**{**TAIL.__dict__, "enabled": False})], samples)
    assert score.caught == 1
    [missing] = measure([], samples)
    assert missing.problem == "no such rule"


@pytest.mark.parametrize(("line", "problem"), [
    ('{"rule": "tail", "expect": "maybe", "text": "x"}', '"expect" must be'),
    ('{"rule": "tail", "expect": "catch"}', 'give "text"'),
    ('{"rule": "tail", "expect": "catch", "text": 5}', '"text" must be a string'),
    ('{"rule": "tail", "expect": "catch", "text": "x", "env": "telegram"}', '"env" must be'),
    ('{"rule": "tail", "expect": "catch", "text": "x", "colour": "red"}', "unknown field"),
    ('{"expect": "catch", "text": "x"}', '"rule" is missing'),
    ('["a list"]', "a sample is a JSON object"),
    ("not json", "line 1:"),
])
def test_corpus_bad_lines_are_refused_with_the_line_named(line: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_corpus(line, source="mine.jsonl")
    assert caught.value.message.startswith("mine.jsonl: line 1:") and problem in caught.value.message


def test_corpus_lines_split_on_newlines_only_and_empty_files_are_refused() -> None:
    [sample] = parse_corpus('{"rule": "tail", "expect": "pass", "text": "a\u2028b END"}')
    assert sample.text == "a\u2028b END"
    with pytest.raises(InvalidInput, match="no samples"):
        parse_corpus("\n// nothing\n")
