"""R2.4 recursion: activated text scanned again, prevent/exclude/delay-until-recursion levels,
max steps, per-book recursive_scanning, and recursion carried across turns by sticky entries."""

from __future__ import annotations

from lore_helpers import book, chat, cuts, entry, run, uids

from evacore.lore import TimedState, WorldInfoSettings

REC = WorldInfoSettings(recursive=True)


def test_r2_4_recursion_off_by_default() -> None:
    b = book(entry(1, ["dragon"], content="Dragons guard gold."), entry(2, ["gold"], content="Gold is heavy."))
    assert uids(run(b, "a dragon")) == [1]


def test_r2_4_recursion_scans_activated_text() -> None:
    b = book(entry(1, ["dragon"], content="Dragons guard gold."), entry(2, ["gold"], content="Gold is heavy."))
    r = run(b, "a dragon", settings=REC)
    assert sorted(uids(r)) == [1, 2]
    second = next(a for a in r.activated if a.uid == 2)
    assert second.recursion_level == 1
    assert second.reasons[0] == "key 'gold' in recursion buffer (after pass 1)"


def test_r2_4_recursion_chains_over_several_passes() -> None:
    b = book(entry(1, ["a1"], content="b2"), entry(2, ["b2"], content="c3"), entry(3, ["c3"], content="end"))
    r = run(b, "a1", settings=REC)
    assert {a.uid: a.recursion_level for a in r.activated} == {1: 0, 2: 1, 3: 2}
    assert r.diagnostics["passes"] == 4  # the last pass finds nothing new and ends the scan


def test_r2_4_prevent_recursion_keeps_text_out_of_the_buffer() -> None:
    b = book(entry(1, ["dragon"], content="gold", prevent_recursion=True), entry(2, ["gold"]))
    assert uids(run(b, "a dragon", settings=REC)) == [1]


def test_r2_4_exclude_recursion_only_matches_the_chat() -> None:
    b = book(entry(1, ["dragon"], content="gold"), entry(2, ["gold"], exclude_recursion=True))
    r = run(b, "a dragon", settings=REC)
    assert uids(r) == [1] and cuts(r) == {2: "exclude_recursion"}
    assert sorted(uids(run(b, "a dragon with gold", settings=REC))) == [1, 2]


def test_r2_4_delay_until_recursion_waits_for_a_recursion_pass() -> None:
    b = book(entry(1, ["dragon"], content="Dragons."), entry(2, ["dragon"], delay_until_recursion=True))
    r = run(b, "a dragon", settings=REC)
    assert {a.uid: a.recursion_level for a in r.activated} == {1: 0, 2: 1}
    # without recursion there is no later pass for the (only) level: it never fires
    off = run(b, "a dragon")
    assert uids(off) == [1] and cuts(off) == {2: "delay_until_recursion"}


def test_r2_4_delay_until_recursion_levels_run_in_order() -> None:
    b = book(
        entry(1, ["dragon"], content="first"),
        entry(2, ["dragon", "second"], content="second", delay_until_recursion=2),
        entry(3, ["first"], content="third", delay_until_recursion=1),
    )
    r = run(b, "a dragon", settings=REC)
    # pass 0: entry 1; pass 1 (level 1): entry 3 from the recursion text; pass 2 finds
    # nothing more at level 1; pass 3 opens level 2 and entry 2 matches the chat.
    assert {a.uid: a.recursion_level for a in r.activated} == {1: 0, 3: 1, 2: 3}


def test_r2_4_delay_levels_open_without_recursion_after_the_first() -> None:
    b = book(entry(1, ["dragon"]), entry(2, ["dragon"], delay_until_recursion=1),
             entry(3, ["dragon"], delay_until_recursion=2))
    r = run(b, "a dragon")
    # level 1 is the starting level, reachable only through recursion; level 2 still opens
    # as a later pass, and every level up to it is allowed there
    assert {a.uid: a.recursion_level for a in r.activated} == {1: 0, 2: 1, 3: 1}


def test_r2_4_delayed_entry_found_only_in_recursion_text() -> None:
    b = book(entry(1, ["dragon"], content="gold"), entry(2, ["gold"], delay_until_recursion=True))
    assert sorted(uids(run(b, "a dragon", settings=REC))) == [1, 2]
    # no matching key anywhere: the delayed pass finds nothing
    assert uids(run(b, "nothing")) == []


def test_r2_4_max_recursion_steps_limits_passes() -> None:
    b = book(entry(1, ["a1"], content="b2"), entry(2, ["b2"], content="c3"), entry(3, ["c3"]))
    one = run(b, "a1", settings=WorldInfoSettings(recursive=True, max_recursion_steps=1))
    two = run(b, "a1", settings=WorldInfoSettings(recursive=True, max_recursion_steps=2))
    assert uids(one) == [1]
    assert sorted(uids(two)) == [1, 2]


def test_r2_4_book_recursive_scanning_false_forbids_recursion() -> None:
    closed = book(entry(1, ["dragon"], content="gold"), entry(2, ["gold"]), name="closed",
                  recursive_scanning=False)
    assert uids(run(closed, "a dragon", settings=REC)) == [1]
    # another book's entries are not triggered by the closed book's text either
    other = book(entry(3, ["gold"]), name="other")
    assert uids(run([closed, other], "a dragon", settings=REC)) == [1]


def test_r2_4_book_recursive_scanning_true_enables_it_for_that_book() -> None:
    open_book = book(entry(1, ["dragon"], content="gold"), entry(2, ["gold"]), recursive_scanning=True)
    assert sorted(uids(run(open_book, "a dragon"))) == [1, 2]


def test_r2_4_recursion_carried_across_turns_by_sticky_entry() -> None:
    b = book(entry(1, ["dragon"], content="The hoard of gold.", sticky=4), entry(2, ["gold"]))
    first = run(b, chat("a dragon!"), settings=REC, turn=1)
    assert sorted(uids(first)) == [1, 2]
    later = chat("a dragon!", "Indeed.", "let's talk about tea")
    second = run(b, later, settings=REC, state=first.timed_state, turn=3)
    reasons = {a.uid: a.reasons[0] for a in second.activated}
    assert reasons == {1: "sticky", 2: "key 'gold' in recursion buffer (after pass 1)"}
    # once the sticky span is over, neither comes back
    done = run(b, later + chat("tea", "more tea"), settings=REC, state=second.timed_state, turn=5)
    assert uids(done) == []


def test_r2_4_failed_probability_is_not_retried_in_recursion() -> None:
    b = book(entry(1, ["dragon"], content="dragon gold"), entry(2, ["dragon"], probability=0),
             entry(3, ["gold"]))
    r = run(b, "a dragon", settings=REC, state=TimedState())
    assert sorted(uids(r)) == [1, 3] and cuts(r) == {2: "probability"}
