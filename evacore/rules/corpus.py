"""Rule corpora: JSON Lines files of texts a rule must catch and texts it must let pass, and
the catch rate and false-positive rate of rules measured on them through the engine's matcher.

One line is one sample:
`{"rule": "look_before_refusing", "expect": "catch", "text": "I can't see images."}`
(`expect` is `catch` or `pass`; a tool rule's sample has `"tool"` and `"arguments"` instead of
`text`; `"env"`, a list of flags, overrides the default that the rule's `when` holds; `"note"`
is free text). `rule` may be left out when the whole file is about one rule. Blank lines and
lines starting with `//` are skipped.

Must not: read the database, fire rules or touch telemetry; measuring is a probe per sample.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from evacore.errors import InvalidInput
from evacore.rules.model import Rule
from evacore.rules.probe import compile_for_probe, probe_rule

EXPECTS = ("catch", "pass")
_KEYS = {"rule", "expect", "text", "tool", "arguments", "env", "note"}


@dataclass(frozen=True)
class Sample:
    rule: str
    expect: str
    """`catch`: the rule must fire; `pass`: it must not."""
    text: str | None = None
    tool: str | None = None
    arguments: str = "{}"
    env: tuple[str, ...] | None = None
    """None: the rule's `when` is assumed to hold."""
    line: int = 0

    @property
    def shown(self) -> str:
        return self.text if self.text is not None else f"{self.tool} {self.arguments}"


@dataclass
class Score:
    """One rule's figures on a corpus."""

    rule: str
    caught: int = 0
    catch_total: int = 0
    false_positives: int = 0
    pass_total: int = 0
    misses: list[Sample] = field(default_factory=list)
    """`catch` samples the rule let through."""
    false_alarms: list[Sample] = field(default_factory=list)
    """`pass` samples the rule fired on."""
    problem: str | None = None
    """Why the rule could not be measured (not found, not loadable)."""

    @property
    def catch_rate(self) -> float | None:
        return self.caught / self.catch_total if self.catch_total else None

    @property
    def false_positive_rate(self) -> float | None:
        return self.false_positives / self.pass_total if self.pass_total else None


def parse_corpus(text: str, *, rule: str | None = None, source: str = "corpus") -> list[Sample]:
    """The samples of a JSON Lines corpus; InvalidInput names every bad line (at most ten)."""
    samples: list[Sample] = []
    problems: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 is text
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        try:
            samples.append(_sample(json.loads(line), rule, number))
        except (ValueError, TypeError) as exc:
            problems.append(f"line {number}: {exc}")
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise InvalidInput(f"{source}: " + "; ".join(problems[:10]) + more)
    if not samples:
        raise InvalidInput(f"{source}: no samples (one JSON object per line)")
    return samples


def _sample(data: Any, default_rule: str | None, number: int) -> Sample:
    if not isinstance(data, dict):
        raise TypeError("a sample is a JSON object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    name = data.get("rule", default_rule)
    if not isinstance(name, str) or not name:
        raise ValueError('"rule" is missing (or give the rule name on the command line)')
    if default_rule is not None and name != default_rule:
        raise ValueError(f"the sample is for {name!r}, not {default_rule!r}")
    expect = data.get("expect")
    if expect not in EXPECTS:
        raise ValueError('"expect" must be "catch" or "pass"')
    text, tool, arguments = data.get("text"), data.get("tool"), data.get("arguments", "{}")
    if (text is None) == (tool is None):
        raise ValueError('give "text" (text rules) or "tool" with "arguments" (tool rules)')
    if text is not None and not isinstance(text, str):
        raise ValueError('"text" must be a string')
    if tool is not None and not isinstance(tool, str):
        raise ValueError('"tool" must be a string')
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    env = data.get("env")
    if env is not None and (
        not isinstance(env, list) or not all(isinstance(flag, str) for flag in env)
    ):
        raise ValueError('"env" must be a list of flags')
    return Sample(name, expect, text, tool, arguments, None if env is None else tuple(env), number)


def measure(rules: Iterable[Rule], samples: Sequence[Sample]) -> list[Score]:
    """Each rule's figures on its samples, in the order the rules first appear in the corpus.
    A sample for a rule not among `rules` gives that rule a Score with `problem` set."""
    by_name = {rule.name: rule for rule in rules}
    scores: dict[str, Score] = {}
    compiled: dict[str, Any] = {}
    for sample in samples:
        score = scores.setdefault(sample.rule, Score(sample.rule))
        rule = by_name.get(sample.rule)
        if rule is None:
            score.problem = "no such rule"
            continue
        if sample.rule not in compiled:
            compiled[sample.rule] = compile_for_probe(rule)
        program = compiled[sample.rule]
        if isinstance(program, str):
            score.problem = f"not loadable: {program}"
            continue
        fires = probe_rule(rule, text=sample.text, tool=sample.tool, arguments=sample.arguments,
                           env=sample.env, compiled=program).fires
        if sample.expect == "catch":
            score.catch_total += 1
            score.caught += fires
            if not fires:
                score.misses.append(sample)
        else:
            score.pass_total += 1
            score.false_positives += fires
            if fires:
                score.false_alarms.append(sample)
    return list(scores.values())


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.1f} %"


def report_lines(scores: Iterable[Score], *, show: int = 5) -> list[str]:
    """A plain-text report: one line of figures per rule, then up to `show` misses and false
    positives each."""
    out: list[str] = []
    for s in scores:
        if s.problem:
            out.append(f"{s.rule}: {s.problem}")
            continue
        out.append(
            f"{s.rule}: caught {s.caught}/{s.catch_total} ({percent(s.catch_rate)}), "
            f"false positives {s.false_positives}/{s.pass_total} "
            f"({percent(s.false_positive_rate)})"
        )
        out += [f"  missed (line {m.line}): {m.shown!r}" for m in s.misses[:show]]
        out += [f"  false positive (line {m.line}): {m.shown!r}" for m in s.false_alarms[:show]]
    return out


@cache
def shipped_corpus(name: str) -> tuple[Sample, ...]:
    """The corpus that ships with a seeded rule (`corpora/<name>.jsonl`)."""
    path = resources.files("evacore.rules") / "corpora" / f"{name}.jsonl"
    return tuple(parse_corpus(path.read_text(encoding="utf-8"), rule=name, source=path.name))
