"""R6.10: the six seeded rules, and their corpora (texts each must catch and must let pass)."""

from __future__ import annotations

from typing import Any

import pytest

from evacore.rules import (
    SEED_VERSION,
    SEEDS,
    RepeatState,
    Rule,
    RuleSet,
    Sample,
    TourRules,
    content_hash,
    measure,
    rule_to_json,
    shipped_corpus,
    validate_rule,
)

BY_NAME = {rule.name: rule for rule in SEEDS}


def test_r6_10_the_six_seeds_match_the_table() -> None:
    shape = {name: (r.scope, r.when, r.negate, r.mode) for name, r in BY_NAME.items()}
    assert shape == {
        "write_diff_over_write_file": ("tool:write_file", (), False, "remind"),
        "local_shell_for_his_machine": ("tool:shell", ("client_ops",), False, "remind"),
        "telegram_markdown_image": ("text", ("telegram",), False, "interrupt"),
        "telegram_reply_tail": ("text", ("telegram",), True, "interrupt"),
        "look_before_refusing": ("text", ("picture",), False, "interrupt"),
        "telegram_react_not_emoji": ("text", ("telegram",), False, "interrupt"),
    }


@pytest.mark.parametrize("seed", SEEDS, ids=lambda r: r.name)
def test_r6_10_seed_passes_its_own_validation(seed: Rule) -> None:
    body = {k: v for k, v in rule_to_json(seed).items() if k not in ("created_at", "updated_at")}
    again = validate_rule(body, existing_names=set())
    assert content_hash(again) == seed.seed_hash
    assert seed.seed_version == SEED_VERSION and seed.enabled
    assert 0 < len(seed.text) <= 400


HARD = [seed for seed in SEEDS if seed.scope == "text"]


def _entries(expect: str) -> list[tuple[str, Sample]]:
    return [(seed.name, sample) for seed in SEEDS for sample in shipped_corpus(seed.name)
            if sample.expect == expect]


def _fires(name: str, sample: Sample) -> bool:
    """Through the tour engine, as a real tour judges an answer or a call."""
    seed = BY_NAME[name]
    env = list(seed.when) if sample.env is None else list(sample.env)
    rules = TourRules(RuleSet.compile([seed]), env, RepeatState(), 1)
    if seed.scope == "text":
        assert sample.text is not None
        return rules.check_answer(sample.text).action == "discard"
    assert sample.tool is not None
    return bool(rules.check_tool_call(sample.tool, sample.arguments))


def _id(value: Any) -> str:
    return value.shown[:60] if isinstance(value, Sample) else str(value)


@pytest.mark.parametrize(("name", "sample"), _entries("catch"), ids=_id)
def test_r6_10_seed_catches_its_corpus(name: str, sample: Sample) -> None:
    assert _fires(name, sample)


@pytest.mark.parametrize(("name", "sample"), _entries("pass"), ids=_id)
def test_r6_10_seed_lets_harmless_texts_pass(name: str, sample: Sample) -> None:
    assert not _fires(name, sample)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda r: r.name)
def test_r6_10_every_seed_has_a_full_corpus(seed: Rule) -> None:
    corpus = shipped_corpus(seed.name)
    assert {sample.rule for sample in corpus} == {seed.name}
    wanted = 100 if seed.scope == "text" else 8
    assert sum(s.expect == "catch" for s in corpus) >= wanted
    assert sum(s.expect == "pass" for s in corpus) >= wanted


@pytest.mark.parametrize("seed", HARD, ids=lambda r: r.name)
def test_r6_10_hard_seed_figures_100_percent_caught_at_most_1_percent_false(seed: Rule) -> None:
    [score] = measure(SEEDS, shipped_corpus(seed.name))
    assert score.catch_rate == 1.0, [m.shown for m in score.misses]
    assert score.false_positive_rate is not None and score.false_positive_rate <= 0.01, [
        m.shown for m in score.false_alarms]


def _cyrillic(text: str) -> bool:
    return any("а" <= ch.lower() <= "я" for ch in text)


@pytest.mark.parametrize("name", ["look_before_refusing", "telegram_markdown_image"])
def test_r6_10_corpus_covers_english_and_russian(name: str) -> None:
    for expect in ("catch", "pass"):
        texts = [s.text or "" for s in shipped_corpus(name) if s.expect == expect]
        russian = [t for t in texts if _cyrillic(t)]
        least = 90 if name == "look_before_refusing" else 15
        assert len(russian) >= least and len(texts) - len(russian) >= least


def test_r6_10_refusal_corpus_holds_the_shapes_models_write() -> None:
    texts = [s.text or "" for s in shipped_corpus("look_before_refusing")]
    assert any("’" in t for t in texts)  # curly apostrophes
    assert any("\u200d" in t for t in texts)  # ZWJ sequences
    assert any(any(0x1F3FB <= ord(ch) <= 0x1F3FF for ch in t) for t in texts)  # skin tones
    assert any("\u00a0" in t for t in texts)  # odd spacing before the end
    assert any("не умею" in t.lower() for t in texts)
    assert any("```" in t for t in texts) and any("\n- " in t or t.startswith("- ") for t in texts)


def test_r6_10_bare_emoji_in_telegram_is_caught_as_a_reaction_before_the_missing_tail() -> None:
    rules = TourRules(RuleSet.compile(SEEDS), {"telegram": True}, RepeatState(), 1)
    verdict = rules.check_answer("👍")
    assert verdict.action == "discard" and verdict.rule is not None
    assert verdict.rule.name == "telegram_react_not_emoji"


def test_r6_10_seeds_are_silent_on_a_good_telegram_answer_with_a_picture() -> None:
    rules = TourRules(
        RuleSet.compile(SEEDS),
        {"telegram": True, "picture": True, "client_ops": True},
        RepeatState(),
        1,
    )
    assert rules.check_answer("На фото рыжий кот на подоконнике 🐈 ↩ #1042").action == "pass"
