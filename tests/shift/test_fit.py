"""R2.7: fitting order, protected content, groups, chunked history cuts and the anchor."""

from __future__ import annotations

import pytest

from evacore.errors import ContextOverflow
from evacore.shift import FitAnchor, FitItem, fit, select_history


def history(n: int, tokens: int = 100, start: int = 0, order0: int = 10) -> list[FitItem]:
    return [FitItem(f"h{i}", tokens, "history", order=order0 + i, history_index=i)
            for i in range(start, start + n)]


def base() -> list[FitItem]:
    return [
        FitItem("sys", 200, "system", protected=True, order=0),
        FitItem("card", 100, "card", order=1),
        FitItem("input", 50, "input", protected=True, order=1000),
    ]


def test_r2_7_everything_fits_nothing_removed() -> None:
    items = base() + history(5)
    result = fit(items, 2000)
    assert result.removed == [] and result.total_tokens == 850
    assert result.kept_ids == ["sys", "card", "h0", "h1", "h2", "h3", "h4", "input"]
    assert result.anchor == FitAnchor(None) and not result.cut


def test_r2_7_oldest_history_goes_first_in_a_chunk() -> None:
    items = base() + history(20)  # 350 fixed + 2000 history
    result = fit(items, 2000, chunk=0.3)  # low water 1400
    assert result.total_tokens <= 1400
    removed = [r.id for r in result.removed]
    assert removed == [f"h{i}" for i in range(len(removed))]  # oldest first, contiguous
    assert all(r.reason == "history" for r in result.removed)
    assert result.anchor.window_start == len(removed) and result.cut


def test_r2_7_removal_order_history_then_lore_then_retrieval_then_examples() -> None:
    items = base() + [
        FitItem("ex1", 300, "examples", order=2),
        FitItem("ex2", 300, "examples", order=3),
        FitItem("lore_hi", 300, "lore", priority=10, order=4),
        FitItem("lore_lo", 300, "lore", priority=1, order=5),
        FitItem("rag", 300, "retrieval", order=900),
    ] + history(3)
    result = fit(items, 700)
    kinds = [r.kind for r in result.removed]
    assert kinds == ["history"] * 3 + ["lore", "lore", "retrieval", "examples"]
    assert [r.id for r in result.removed][3:5] == ["lore_lo", "lore_hi"]
    assert result.removed[-1].id == "ex2"  # the later example block goes first
    assert result.kept_ids == ["sys", "card", "ex1", "input"]


def test_r2_7_protected_items_are_never_removed() -> None:
    items = base() + [
        FitItem("mandatory_lore", 400, "lore", protected=True, order=4),
        FitItem("pinned", 300, "history", protected=True, order=10, history_index=0),
    ] + history(5, start=1)
    result = fit(items, 1100)
    kept = set(result.kept_ids)
    assert {"sys", "input", "mandatory_lore", "pinned", "card"} <= kept
    assert result.total_tokens <= 1100


def test_r2_7_overflow_error_names_the_sizes() -> None:
    items = [FitItem("sys", 700, "system", protected=True),
             FitItem("input", 400, "input", protected=True, order=9)] + history(3)
    with pytest.raises(ContextOverflow) as info:
        fit(items, 1000)
    assert "1100" in info.value.message and "1000" in info.value.message
    assert info.value.details["protected_tokens"] == 1100
    assert info.value.details["budget"] == 1000
    assert info.value.status == 422 and info.value.code == "context_overflow"


def test_r2_7_tool_call_and_results_leave_together() -> None:
    items = base() + [
        FitItem("call", 50, "history", group="t1", order=10, history_index=0),
        FitItem("result", 400, "history", group="t1", order=11, history_index=1),
    ] + history(3, start=2, order0=12)
    result = fit(items, 700, chunk=0)
    removed = [r.id for r in result.removed]
    # removing the 50-token call would be enough, but it must take its result with it
    assert removed == ["call", "result"]
    assert result.total_tokens == 650


def test_r2_7_anchor_keeps_the_prefix_until_over_budget() -> None:
    fixed = base()
    first = fit(fixed + history(30), 3000, chunk=0.3)
    assert first.cut
    anchor = first.anchor
    start = anchor.window_start
    # three more turns: still fits, same first kept history message, no new cut
    for n in (31, 32, 33):
        result = fit(fixed + history(n), 3000, chunk=0.3, anchor=anchor)
        assert result.anchor.window_start == start and not result.cut
        assert all(r.reason == "window" for r in result.removed)
        assert result.total_tokens <= 3000
        anchor = result.anchor


def test_r2_7_anchor_round_trips_and_readds_when_room_frees() -> None:
    anchor = FitAnchor.from_dict(FitAnchor(window_start=12).to_dict())
    assert anchor.window_start == 12 and FitAnchor.from_dict(None) == FitAnchor(None)
    # much more room now (bigger budget): dropped messages come back, up to low water
    result = fit(base() + history(20), 10_000, chunk=0.3, anchor=anchor)
    assert result.anchor.window_start == 0 and result.removed == []
    # a little more room: not a whole chunk, so the window stays
    result = fit(base() + history(20), 1800, chunk=0.3, anchor=anchor)
    assert result.anchor.window_start == 12


def test_r2_7_chunk_accepts_tokens_or_fraction() -> None:
    items = base() + history(20)
    by_tokens = fit(items, 2000, chunk=600)
    by_fraction = fit(items, 2000, chunk=0.3)
    assert by_tokens.kept_ids == by_fraction.kept_ids
    no_chunk = fit(items, 2000, chunk=0)  # drop only what is needed: 4 × 100 of 2350
    assert no_chunk.total_tokens == 1950 and len(no_chunk.removed) == 4


def test_r2_7_small_room_halves_the_headroom_instead_of_dropping_all_history() -> None:
    items = [FitItem("sys", 1500, "system", protected=True)] + history(10)
    result = fit(items, 2000, chunk=0.3)  # low water 1400 is below the fixed 1500
    kept_history = [i for i in result.kept_ids if i.startswith("h")]
    assert kept_history and result.total_tokens <= 1750


def test_r2_7_select_history_passes_one_overflowing_item_and_keeps_groups() -> None:
    items = history(10)
    picked = select_history(reversed(items), 450)
    # h6..h9 fit (400); h5 is the first past the room, so fit can see the overflow
    assert [i.id for i in picked] == ["h5", "h6", "h7", "h8", "h9"]
    grouped = [FitItem("a", 100, "history", group="g", history_index=0),
               FitItem("b", 100, "history", group="g", history_index=1),
               FitItem("c", 100, "history", history_index=2),
               FitItem("d", 100, "history", history_index=3)]
    picked = select_history(reversed(grouped), 250)
    assert [i.id for i in picked] == ["a", "b", "c", "d"]  # b overflows, a completes the group


def test_r2_7_select_history_takes_the_whole_window() -> None:
    items = history(30)
    picked = select_history(reversed(items), 500, FitAnchor(window_start=12))
    # the window h12..h29 (1800 tokens) goes in whole, then one item past the room
    assert [i.id for i in picked] == [f"h{i}" for i in range(11, 30)]


def test_r2_7_select_history_reads_only_what_it_needs() -> None:
    consumed = 0

    def stream():  # a 100k-message chat, newest first
        nonlocal consumed
        for i in range(99_999, -1, -1):
            consumed += 1
            yield FitItem(f"h{i}", 100, "history", history_index=i, order=i)

    picked = select_history(stream(), 5_000)
    assert len(picked) == 51 and consumed == 52


def test_r2_7_selection_then_fit_cuts_in_chunks() -> None:
    """With the selection in front, the prefix still survives several turns."""
    fixed = base()
    chat = history(40)
    anchor = None
    firsts = []
    for turn in range(12):
        chat.append(FitItem(f"n{turn}", 100, "history", order=100 + turn,
                            history_index=40 + turn))
        candidates = select_history(reversed(chat), 2000 - 350, anchor)
        result = fit([*fixed, *candidates], 2000, chunk=0.3, anchor=anchor)
        anchor = result.anchor
        firsts.append(next(i for i in result.kept_ids if i[0] in "hn"))
    assert len(set(firsts)) <= 3  # a cut every ~6 turns, not every turn


def test_r2_7_a_message_in_a_group_of_its_own_fits_as_a_lone_item_would() -> None:
    """History messages arrive each in a group of one (its tool calls would join it): they
    are cut, kept and counted exactly as the same items without a group."""
    def items(grouped: bool) -> list[FitItem]:
        out = [FitItem(id="sys", tokens=40, kind="system", order=0),
               FitItem(id="lore", tokens=30, kind="lore", order=1, priority=2)]
        for i in range(12):
            out.append(FitItem(id=f"h{i}", tokens=10 + i, kind="history", order=2 + i,
                               group=f"m{i}" if grouped else None, history_index=i,
                               protected=i == 11))
        return out

    for budget, anchor in ((400, None), (150, None), (150, FitAnchor(4)), (120, FitAnchor(9))):
        alone = fit(items(False), budget, chunk=0.2, anchor=anchor)
        grouped = fit(items(True), budget, chunk=0.2, anchor=anchor)
        assert grouped == alone
    assert fit(items(True), 150, chunk=0.2).removed  # the budget does cut history here
