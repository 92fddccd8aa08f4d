"""R2.4 probability: per-entry rolls from a seeded generator, recorded in diagnostics."""

from __future__ import annotations

from lore_helpers import book, cuts, entry, run, uids


def test_r2_4_probability_zero_never_activates() -> None:
    r = run(book(entry(1, ["k"], probability=0)), "k", seed=3)
    assert uids(r) == [] and cuts(r) == {1: "probability"}


def test_r2_4_probability_hundred_or_unused_always_activates() -> None:
    b = book(entry(1, ["k"], probability=100), entry(2, ["k"], probability=0, use_probability=False))
    assert all(sorted(uids(run(b, "k", seed=s))) == [1, 2] for s in range(20))


def test_r2_4_probability_roll_is_reproducible_and_seeded() -> None:
    b = book(*(entry(i, ["k"], probability=50) for i in range(10)))
    assert uids(run(b, "k", seed=7)) == uids(run(b, "k", seed=7))
    outcomes = {tuple(sorted(uids(run(b, "k", seed=s)))) for s in range(20)}
    assert len(outcomes) > 10
    counts = [len(uids(run(b, "k", seed=s))) for s in range(50)]
    assert 150 < sum(counts) < 350  # about half of 500
    assert run(b, "k", seed=7).diagnostics["seed"] == 7
