"""R2.4 timed effects (sticky, cooldown, delay) counted in chat messages and carried
between scans through TimedState."""

from __future__ import annotations

import json

from lore_helpers import book, chat, cuts, entry, run, uids

from evacore.lore import CharacterStrategy, SourcedBook, TimedRecord, TimedState
from evacore.lore._index import compile_books


def msgs(n: int, last: str = "nothing") -> list:
    return chat(*(["filler"] * (n - 1) + [last]))


def test_r2_4_sticky_keeps_entry_active_for_its_span() -> None:
    b = book(entry(1, ["dragon"], sticky=3))
    r1 = run(b, msgs(1, "a dragon"), turn=1)
    assert uids(r1) == [1]
    assert r1.timed_state.sticky == {"B.1": TimedRecord(hash=r1.timed_state.sticky["B.1"].hash, start=1, end=4)}
    r2 = run(b, msgs(2), state=r1.timed_state, turn=2)
    r3 = run(b, msgs(3), state=r2.timed_state, turn=3)
    r4 = run(b, msgs(4), state=r3.timed_state, turn=4)
    assert (uids(r2), uids(r3), uids(r4)) == ([1], [1], [])
    assert r2.activated[0].reasons == ["sticky"]
    assert r4.timed_state.sticky == {}


def test_r2_4_cooldown_blocks_reactivation() -> None:
    b = book(entry(1, ["dragon"], cooldown=3))
    r1 = run(b, msgs(1, "a dragon"), turn=1)
    r2 = run(b, msgs(2, "a dragon"), state=r1.timed_state, turn=2)
    r3 = run(b, msgs(3, "a dragon"), state=r2.timed_state, turn=3)
    r4 = run(b, msgs(4, "a dragon"), state=r3.timed_state, turn=4)
    assert (uids(r1), uids(r2), uids(r3), uids(r4)) == ([1], [], [], [1])
    assert cuts(r2) == {1: "cooldown"}


def test_r2_4_cooldown_starts_when_sticky_ends() -> None:
    b = book(entry(1, ["dragon"], sticky=2, cooldown=2))
    state = TimedState()
    seen = []
    for turn in range(1, 7):
        r = run(b, msgs(turn, "a dragon"), state=state, turn=turn)
        seen.append(uids(r) == [1])
        state = r.timed_state
        if turn == 3:
            assert state.cooldown["B.1"].protected is True
    # 1: keys, 2: sticky, 3-4: cooldown after the sticky ended, 5: keys again, 6: sticky
    assert seen == [True, True, False, False, True, True]


def test_r2_4_delay_waits_for_chat_length() -> None:
    b = book(entry(1, ["dragon"], delay=3))
    r = run(b, msgs(2, "a dragon"), turn=2)
    assert uids(r) == [] and cuts(r) == {1: "delay"}
    assert uids(run(b, msgs(3, "a dragon"), turn=3)) == [1]


def test_r2_4_swipe_at_same_turn_drops_fresh_sticky_record() -> None:
    b = book(entry(1, ["dragon"], sticky=5))
    first = run(b, msgs(3, "a dragon"), turn=3)
    assert "B.1" in first.timed_state.sticky
    swipe = run(b, msgs(3, "no beasts"), state=first.timed_state, turn=3, generation_type="swipe")
    assert uids(swipe) == [] and swipe.timed_state.sticky == {}


def test_r2_4_dry_run_neither_reads_nor_writes_timed_state() -> None:
    b = book(entry(1, ["dragon"], sticky=5, cooldown=5))
    live = run(b, msgs(1, "a dragon"), turn=1)
    dry = run(b, msgs(2), state=live.timed_state, turn=2, dry_run=True)
    assert uids(dry) == [] and dry.timed_state == live.timed_state
    fresh = run(b, msgs(1, "a dragon"), turn=1, dry_run=True)
    assert uids(fresh) == [1] and fresh.timed_state == TimedState()


def test_r2_4_edited_entry_loses_its_sticky_record() -> None:
    r1 = run(book(entry(1, ["dragon"], sticky=3)), msgs(1, "a dragon"), turn=1)
    edited = book(entry(1, ["dragon"], sticky=3, content="new text"))
    r2 = run(edited, msgs(2), state=r1.timed_state, turn=2)
    assert uids(r2) == [] and "B.1" in r2.timed_state.sticky
    r3 = run(edited, msgs(4), state=r2.timed_state, turn=4)
    assert r3.timed_state.sticky == {}


def test_r2_4_entry_without_effect_drops_its_record() -> None:
    b = book(entry(1, ["dragon"], sticky=None))
    compiled, _ = compile_books([SourcedBook(b, "global")], CharacterStrategy.CHARACTER_FIRST, False)
    # a record whose hash names this very entry, which has no sticky span (any more)
    state = TimedState(sticky={"B.1": TimedRecord(compiled.entries[0].hash, 1, 4)})
    r2 = run(b, msgs(2), state=state, turn=2)
    assert uids(r2) == [] and r2.timed_state.sticky == {}


def test_r2_4_sticky_entry_skips_probability_roll() -> None:
    b = book(entry(1, ["dragon"], sticky=4, probability=50))
    seed = next(s for s in range(100) if uids(run(b, msgs(1, "a dragon"), turn=1, seed=s)) == [1])
    first = run(b, msgs(1, "a dragon"), turn=1, seed=seed)
    assert all(
        uids(run(b, msgs(2, "a dragon"), state=first.timed_state, turn=2, seed=s)) == [1]
        for s in range(30)
    )


def test_r2_4_timed_state_json_round_trip() -> None:
    state = TimedState(
        sticky={"B.1": TimedRecord("abc", 1, 4)},
        cooldown={"B.2": TimedRecord("def", 2, 5, protected=True)},
    )
    data = json.dumps(state.to_json())
    assert TimedState.from_json(data) == state
    assert TimedState.from_json(json.loads(data)) == state


def test_r2_4_timed_state_reads_sillytavern_shape_and_drops_bad_records() -> None:
    st = {"sticky": {"Book.3": {"hash": 123456, "start": 4, "end": 7, "protected": False},
                     "bad": "nope"}, "cooldown": None}
    state = TimedState.from_json(st)
    assert state.sticky == {"Book.3": TimedRecord("123456", 4, 7)} and state.cooldown == {}
    assert TimedState.from_json("not json") == TimedState()
    assert TimedState.from_json(None) == TimedState()
