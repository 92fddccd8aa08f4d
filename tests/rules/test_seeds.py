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
    TourRules,
    content_hash,
    load_corpus,
    rule_to_json,
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


def _entries(kind: str) -> list[tuple[str, Any]]:
    return [(seed.name, entry) for seed in SEEDS for entry in load_corpus(seed.name)[kind]]


def _fires(name: str, entry: Any) -> bool:
    seed = BY_NAME[name]
    if isinstance(entry, str):
        entry = {"text": entry}
    env = entry.get("env", list(seed.when))
    rules = TourRules(RuleSet.compile([seed]), env, RepeatState(), 1)
    if seed.scope == "text":
        return rules.check_answer(entry["text"]).action == "discard"
    return bool(rules.check_tool_call(entry["tool"], entry["arguments"]))


@pytest.mark.parametrize(
    ("name", "entry"), _entries("catch"), ids=lambda v: v if isinstance(v, str) else ""
)
def test_r6_10_seed_catches_its_corpus(name: str, entry: Any) -> None:
    assert _fires(name, entry)


@pytest.mark.parametrize(
    ("name", "entry"), _entries("pass"), ids=lambda v: v if isinstance(v, str) else ""
)
def test_r6_10_seed_lets_harmless_texts_pass(name: str, entry: Any) -> None:
    assert not _fires(name, entry)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda r: r.name)
def test_r6_10_every_seed_has_a_full_corpus(seed: Rule) -> None:
    corpus = load_corpus(seed.name)
    assert corpus["rule"] == seed.name
    assert len(corpus["catch"]) >= 8 and len(corpus["pass"]) >= 8


def test_r6_10_refusal_corpus_covers_english_and_russian() -> None:
    corpus = load_corpus("look_before_refusing")
    for kind in ("catch", "pass"):
        texts = [e if isinstance(e, str) else e["text"] for e in corpus[kind]]
        cyrillic = [t for t in texts if any("а" <= ch.lower() <= "я" for ch in t)]
        assert len(cyrillic) >= 8 and len(texts) - len(cyrillic) >= 8


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
