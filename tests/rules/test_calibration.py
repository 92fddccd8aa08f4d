"""R6.10: seeding once per database lifetime, and calibration waves that spare the master's hand."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from evacore.rules import (
    SEEDS,
    Rule,
    SeedPlan,
    StoredRuleState,
    apply_patch,
    content_hash,
    plan_seeding,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class FakeStore:
    """Rules by name plus the seed meta, applying plans like the store will."""

    def __init__(self) -> None:
        self.rules: dict[str, Rule] = {}
        self.meta: dict[str, Any] | None = None

    def wave(
        self, seeds: tuple[Rule, ...] = SEEDS, now: datetime = T0, version: int = 1
    ) -> SeedPlan:
        plan = plan_seeding(
            [StoredRuleState.from_rule(r) for r in self.rules.values()],
            self.meta,
            seeds,
            now=now,
            version=version,
        )
        for rule in (*plan.create, *plan.rewrite):
            self.rules[rule.name] = rule
        if plan.meta_changed:
            self.meta = plan.new_meta
        return plan


def _reasons(plan: SeedPlan) -> dict[str, str]:
    return {left.name: left.reason for left in plan.leave}


def _new_release(name: str, text: str, version: int = 2) -> tuple[Rule, ...]:
    out = []
    for seed in SEEDS:
        if seed.name == name:
            seed = dataclasses.replace(seed, text=text, seed_hash=None, seed_version=version)
            seed = dataclasses.replace(seed, seed_hash=content_hash(seed))
        out.append(seed)
    return tuple(out)


def test_r6_10_first_start_seeds_all_six_and_a_second_start_changes_nothing() -> None:
    store = FakeStore()
    first = store.wave()
    assert sorted(r.name for r in first.create) == sorted(s.name for s in SEEDS)
    assert all(r.seeded and r.created_at == T0 and r.updated_at == T0 for r in first.create)
    assert set(store.meta["rules"]) == {s.name for s in SEEDS}  # type: ignore[index]
    second = store.wave(now=T0 + timedelta(days=1))
    assert not second.changed and set(_reasons(second).values()) == {"current"}


def test_r6_10_deleted_seeded_rule_never_comes_back() -> None:
    store = FakeStore()
    store.wave()
    del store.rules["telegram_reply_tail"]
    plan = store.wave(
        _new_release("telegram_reply_tail", "New wording."), now=T0 + timedelta(days=9), version=2
    )
    assert _reasons(plan)["telegram_reply_tail"] == "deleted"
    assert "telegram_reply_tail" not in store.rules and not plan.create and not plan.rewrite


def test_r6_10_wave_rewrites_an_untouched_seed_and_is_idempotent() -> None:
    store = FakeStore()
    store.wave()
    later = T0 + timedelta(days=30)
    release = _new_release("look_before_refusing", "Look at the picture before you answer.")
    plan = store.wave(release, now=later, version=2)
    [rewritten] = plan.rewrite
    assert (
        rewritten.name == "look_before_refusing"
        and rewritten.text == "Look at the picture before you answer."
    )
    assert (
        rewritten.created_at == T0 and rewritten.updated_at == later and rewritten.seed_version == 2
    )
    assert rewritten.seed_hash == content_hash(rewritten)
    assert store.meta["version"] == 2  # type: ignore[index]
    again = store.wave(release, now=later + timedelta(days=1), version=2)
    assert not again.changed


def test_r6_10_wave_leaves_an_edited_seed() -> None:
    store = FakeStore()
    store.wave()
    name = "write_diff_over_write_file"
    store.rules[name] = apply_patch(
        store.rules[name], {"repeat": "once"}, now=T0 + timedelta(days=1)
    )
    plan = store.wave(_new_release(name, "Newer words."), now=T0 + timedelta(days=2), version=2)
    assert _reasons(plan)[name] == "edited" and not plan.rewrite
    assert store.rules[name].repeat == "once"


def test_r6_10_wave_leaves_a_disabled_seed() -> None:
    store = FakeStore()
    store.wave()
    name = "telegram_markdown_image"
    store.rules[name] = apply_patch(
        store.rules[name], {"enabled": False}, now=T0 + timedelta(days=1)
    )
    plan = store.wave(_new_release(name, "Newer words."), now=T0 + timedelta(days=2), version=2)
    assert _reasons(plan)[name] == "disabled" and not store.rules[name].enabled


def test_r6_10_seed_edited_and_changed_back_counts_as_touched_by_updated_at() -> None:
    store = FakeStore()
    store.wave()
    name = "telegram_react_not_emoji"
    original = store.rules[name]
    edited = apply_patch(original, {"text": "mine"}, now=T0 + timedelta(days=1))
    store.rules[name] = apply_patch(edited, {"text": original.text}, now=T0 + timedelta(days=2))
    plan = store.wave(_new_release(name, "Newer words."), now=T0 + timedelta(days=3), version=2)
    assert _reasons(plan)[name] == "edited"


def test_r6_10_masters_own_rule_with_a_seed_name_is_not_overwritten() -> None:
    store = FakeStore()
    mine = Rule(
        name="telegram_reply_tail", scope="text", text="my own", created_at=T0, updated_at=T0
    )
    store.rules[mine.name] = mine
    plan = store.wave()
    assert _reasons(plan)["telegram_reply_tail"] == "not_seeded"
    assert store.rules["telegram_reply_tail"] is mine and len(plan.create) == 5
    del store.rules["telegram_reply_tail"]
    assert not store.wave(
        now=T0 + timedelta(days=1)
    ).create  # the name was claimed: no late seeding


def test_r6_10_seed_added_in_a_later_release_is_created_once() -> None:
    store = FakeStore()
    store.wave()
    extra = Rule(name="new_seed", scope="text", condition="x", text="t", seed_version=2)
    extra = dataclasses.replace(extra, seed_hash=content_hash(extra))
    plan = store.wave((*SEEDS, extra), now=T0 + timedelta(days=5), version=2)
    assert [r.name for r in plan.create] == ["new_seed"]
    del store.rules["new_seed"]
    assert not store.wave((*SEEDS, extra), now=T0 + timedelta(days=6), version=2).create


def test_r6_10_lost_meta_does_not_duplicate_or_resurrect() -> None:
    store = FakeStore()
    store.wave()
    store.meta = None
    plan = store.wave(now=T0 + timedelta(days=1))
    assert not plan.create and not plan.rewrite and plan.meta_changed
    assert set(store.meta["rules"]) == {s.name for s in SEEDS}  # type: ignore[index]


def test_r6_10_naive_database_timestamps_are_read_as_utc() -> None:
    store = FakeStore()
    store.wave()
    for name, rule in store.rules.items():  # what SQLite gives back: naive datetimes
        store.rules[name] = dataclasses.replace(
            rule, updated_at=rule.updated_at.replace(tzinfo=None)
        )  # type: ignore[union-attr]
    plan = store.wave(
        _new_release("telegram_reply_tail", "Newer."), now=T0 + timedelta(days=1), version=2
    )
    assert [r.name for r in plan.rewrite] == ["telegram_reply_tail"]
