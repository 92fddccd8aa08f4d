"""R2.4 token budget: % of context with a cap, spent in priority order; `mandatory` entries are
never cut, constant ones are."""

from __future__ import annotations

from lore_helpers import book, cuts, entry, run, uids

from evacore.lore import WorldInfoSettings, compute_budget


def text(n: int) -> str:
    return " ".join(["word"] * n)


def test_r2_4_budget_is_share_of_context_with_cap() -> None:
    assert compute_budget(WorldInfoSettings(), 1000) == 250
    assert compute_budget(WorldInfoSettings(budget=10), 1000) == 100
    assert compute_budget(WorldInfoSettings(budget_cap=80), 1000) == 80
    assert compute_budget(WorldInfoSettings(budget=1), 10) == 1  # rounds to 0, then at least 1
    assert run(book(), "x", max_context=1000).diagnostics["budget"] == 250


def test_r2_4_budget_spent_by_priority_order() -> None:
    b = book(entry(1, ["k"], text(4), order=100), entry(2, ["k"], text(4), order=300),
             entry(3, ["k"], text(4), order=200))
    r = run(b, "k", max_context=40)  # 25% of 40 = 10 tokens
    assert sorted(uids(r)) == [2, 3] and cuts(r) == {1: "budget"}
    assert r.diagnostics["overflowed"] is True and r.diagnostics["tokens_used"] == 8


def test_r2_4_overflow_stops_smaller_entries_too() -> None:
    b = book(entry(1, ["k"], text(20), order=300), entry(2, ["k"], text(1), order=200))
    r = run(b, "k", max_context=40)
    assert uids(r) == [] and cuts(r) == {1: "budget", 2: "budget"}


def test_r2_4_mandatory_survives_budget_that_cuts_everything_else() -> None:
    b = book(
        entry(1, ["k"], text(6), order=300),
        entry(2, [], text(6), constant=True, order=200),
        entry(3, ["k"], text(6), order=100, mandatory=True),
    )
    r = run(b, "k", settings=WorldInfoSettings(budget=1), max_context=100)  # budget: 1 token
    assert uids(r) == [3]
    assert cuts(r) == {1: "budget", 2: "budget"}
    act = r.activated[0]
    assert act.mandatory is True and "mandatory: exempt from the budget" in act.reasons


def test_r2_4_constant_without_mandatory_is_cut_by_budget() -> None:
    r = run(book(entry(1, [], text(30), constant=True)), "hi", max_context=40)
    assert uids(r) == [] and cuts(r) == {1: "budget"}


def test_r2_4_mandatory_text_still_spends_budget() -> None:
    b = book(entry(1, ["k"], text(8), order=300, mandatory=True), entry(2, ["k"], text(3), order=200))
    r = run(b, "k", max_context=40)
    assert uids(r) == [1] and cuts(r) == {2: "budget"}


def test_r2_4_recursion_text_counts_against_later_passes() -> None:
    b = book(entry(1, ["dragon"], "dragon gold " + text(4)), entry(2, ["gold"], text(3)))
    r = run(b, "a dragon", settings=WorldInfoSettings(recursive=True, budget_cap=8))
    assert uids(r) == [1] and cuts(r) == {2: "budget"}


def test_r2_4_book_token_budget_limits_its_own_entries() -> None:
    small = book(entry(1, ["k"], text(4), order=200), entry(2, ["k"], text(4), order=100),
                 name="small", token_budget=5)
    other = book(entry(3, ["k"], text(4)), name="other")
    r = run([small, other], "k")
    assert sorted(uids(r)) == [1, 3] and cuts(r) == {2: "book_budget"}


def test_r2_4_overflow_alert_reports_a_warning() -> None:
    b = book(entry(1, ["k"], text(20)))
    quiet = run(b, "k", max_context=40)
    loud = run(b, "k", max_context=40, settings=WorldInfoSettings(overflow_alert=True))
    assert quiet.diagnostics["warnings"] == []
    assert loud.diagnostics["warnings"] == ["World Info budget reached after 0 entries"]


def test_r2_4_cut_reports_the_final_reason() -> None:
    b = book(entry(1, ["k"], text(6), order=300), entry(2, ["k"], text(6), delay_until_recursion=1))
    r = run(b, "k", settings=WorldInfoSettings(recursive=True, budget_cap=8))
    # skipped as delayed in the first pass, then refused by the budget in the recursion pass
    assert uids(r) == [1] and cuts(r) == {2: "budget"}
