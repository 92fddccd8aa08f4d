"""R2.4 inclusion groups: one winner per group by weight, priority or score; sticky members
hold their group across turns."""

from __future__ import annotations

from lore_helpers import book, chat, cuts, entry, run, uids

from evacore.lore import WorldInfoSettings


def test_r2_4_group_keeps_one_member() -> None:
    b = book(entry(1, ["dragon"], group="beast"), entry(2, ["dragon"], group="beast"), entry(3, ["dragon"]))
    r = run(b, "a dragon")
    winners = [u for u in uids(r) if u in (1, 2)]
    assert len(winners) == 1 and 3 in uids(r)
    loser = 3 - winners[0]
    assert cuts(r) == {loser: "group"}


def test_r2_4_group_draw_is_reproducible_per_seed() -> None:
    b = book(entry(1, ["dragon"], group="g"), entry(2, ["dragon"], group="g"))
    assert all(uids(run(b, "a dragon", seed=s)) == uids(run(b, "a dragon", seed=s)) for s in range(20))
    assert run(b, "a dragon", seed=42).diagnostics["seed"] == 42


def test_r2_4_group_weights_shape_the_draw() -> None:
    b = book(entry(1, ["dragon"], group="g", group_weight=300), entry(2, ["dragon"], group="g", group_weight=100))
    wins = sum(uids(run(b, "a dragon", seed=s)) == [1] for s in range(400))
    assert 260 < wins < 340  # expected 300 of 400


def test_r2_4_group_weight_zero_never_wins_against_weight() -> None:
    b = book(entry(1, ["dragon"], group="g", group_weight=0), entry(2, ["dragon"], group="g", group_weight=100))
    assert all(uids(run(b, "a dragon", seed=s)) == [2] for s in range(1, 50))


def test_r2_4_group_override_highest_order_wins() -> None:
    b = book(
        entry(1, ["dragon"], group="g", group_override=True, order=10, group_weight=1000),
        entry(2, ["dragon"], group="g", group_override=True, order=50),
        entry(3, ["dragon"], group="g", order=90),
    )
    assert all(uids(run(b, "a dragon", seed=s)) == [2] for s in range(10))


def test_r2_4_group_scoring_keeps_best_match() -> None:
    b = book(entry(1, ["dragon"], group="g"), entry(2, ["dragon", "red", "cave"], group="g"))
    scoring = WorldInfoSettings(use_group_scoring=True)
    assert all(uids(run(b, "a red dragon in a cave", settings=scoring, seed=s)) == [2] for s in range(10))
    # without scoring both can win
    assert {tuple(uids(run(b, "a red dragon in a cave", seed=s))) for s in range(30)} == {(1,), (2,)}


def test_r2_4_group_scoring_per_entry() -> None:
    b = book(entry(1, ["dragon"], group="g", use_group_scoring=True),
             entry(2, ["dragon", "red"], group="g", use_group_scoring=True))
    assert all(uids(run(b, "a red dragon", seed=s)) == [2] for s in range(10))


def test_r2_4_group_scoring_counts_secondary_keys_for_and_any() -> None:
    b = book(entry(1, ["dragon", "red"], group="g", use_group_scoring=True),
             entry(2, ["dragon"], secondary_keys=("red", "cave"), group="g", use_group_scoring=True))
    assert all(uids(run(b, "a red dragon in a cave", seed=s)) == [2] for s in range(10))


def test_r2_4_entry_in_several_groups() -> None:
    b = book(entry(1, ["dragon"], group="a, b", group_override=True, order=200),
             entry(2, ["dragon"], group="a"), entry(3, ["dragon"], group="b"))
    r = run(b, "a dragon")
    assert uids(r) == [1] and cuts(r) == {2: "group", 3: "group"}


def test_r2_4_single_member_group_keeps_it() -> None:
    assert uids(run(book(entry(1, ["dragon"], group="solo")), "a dragon")) == [1]


def test_r2_4_group_already_active_blocks_later_passes() -> None:
    b = book(entry(1, ["dragon"], content="gold", group="g"), entry(2, ["gold"], group="g"))
    r = run(b, "a dragon", settings=WorldInfoSettings(recursive=True))
    assert uids(r) == [1] and cuts(r) == {2: "group"}


def test_r2_4_sticky_member_holds_its_group_across_turns() -> None:
    b = book(entry(1, ["dragon"], group="g", sticky=5), entry(2, ["wyvern"], group="g"))
    first = run(b, chat("a dragon"), turn=1)
    assert uids(first) == [1]
    msgs = chat("a dragon", "yes", "a wyvern!")
    second = run(b, msgs, state=first.timed_state, turn=3)
    assert uids(second) == [1] and cuts(second) == {2: "group"}
    assert second.activated[0].reasons == ["sticky"]
    # after the sticky span, the wyvern entry can win its group again
    later = chat("a dragon", "yes", "a wyvern!", "ok", "a wyvern again")
    third = run(b, later, state=second.timed_state, turn=6)
    assert uids(third) == [2]
