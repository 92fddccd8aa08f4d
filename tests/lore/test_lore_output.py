"""R2.4 output: insertion order, positions with depth/role/outlet, placement groups, and the
merge of chat, persona, global and character books."""

from __future__ import annotations

from lore_helpers import book, cuts, entry, run, uids

from evacore.lore import CharacterStrategy, Position, Role, SourcedBook, WorldInfoSettings, place


def test_r2_4_activations_sorted_ascending_by_order() -> None:
    b = book(entry(1, ["k"], order=300), entry(2, ["k"], order=100), entry(3, ["k"], order=200))
    assert uids(run(b, "k")) == [2, 3, 1]


def test_r2_4_equal_order_ends_in_reverse_activation_order() -> None:
    b = book(entry(5, ["k"]), entry(2, ["k"]), entry(9, ["k"]))
    # activation follows uid within a book (2, 5, 9); ties are then reversed
    assert uids(run(b, "k")) == [9, 5, 2]


def test_r2_4_activation_carries_placement_fields() -> None:
    e = entry(1, ["k"], position=Position.AT_DEPTH, depth=2, role=Role.ASSISTANT, order=42,
              outlet_name="x")
    a = run(book(e, name="Lore"), "k").activated[0]
    assert (a.position, a.depth, a.role, a.order, a.book_name, a.source) == (
        Position.AT_DEPTH, 2, Role.ASSISTANT, 42, "Lore", "global")
    assert a.content == "E1" and a.recursion_level == 0 and a.tokens == 1


def test_r2_4_placement_groups_positions_like_sillytavern() -> None:
    b = book(
        entry(1, ["k"], "before-a", order=1),
        entry(2, ["k"], "before-b", order=2),
        entry(3, ["k"], "after", position=Position.AFTER_CHAR),
        entry(4, ["k"], "an-top", position=Position.AN_TOP),
        entry(5, ["k"], "an-bottom", position=Position.AN_BOTTOM),
        entry(6, ["k"], "deep-1", position=Position.AT_DEPTH, depth=1, order=10),
        entry(7, ["k"], "deep-2", position=Position.AT_DEPTH, depth=1, order=20),
        entry(8, ["k"], "deep-user", position=Position.AT_DEPTH, depth=1, role=Role.USER),
        entry(9, ["k"], "<START>\nex-top", position=Position.EM_TOP),
        entry(10, ["k"], "ex-bottom", position=Position.EM_BOTTOM),
        entry(11, ["k"], "out-1", position=Position.OUTLET, outlet_name="lore"),
        entry(12, ["k"], "nameless", position=Position.OUTLET),
        entry(13, ["k"], "unknown", position=9),  # type: ignore[arg-type]
    )
    r = run(b, "k")
    assert 13 in uids(r)  # activated (and spends budget) though nothing is inserted
    p = place(r.activated)
    assert p.before == "before-a\nbefore-b"
    assert (p.after, p.an_top, p.an_bottom) == ("after", "an-top", "an-bottom")
    assert [(d.depth, d.role, d.content) for d in p.at_depth] == [
        (1, Role.SYSTEM, "deep-1\ndeep-2"), (1, Role.USER, "deep-user")]
    assert p.examples_top == ("<START>\nex-top",) and p.examples_bottom == ("ex-bottom",)
    assert p.outlets == {"lore": "out-1"}


def test_r2_4_placement_marks_mandatory_depth_inserts() -> None:
    b = book(entry(1, ["k"], position=Position.AT_DEPTH, mandatory=True))
    assert place(run(b, "k").activated).at_depth[0].mandatory is True


def test_r2_4_empty_content_is_not_inserted() -> None:
    r = run(book(entry(1, ["k"], "@@activate")), "hello")
    assert uids(r) == [] and cuts(r) == {1: "empty"}


def test_r2_4_sources_merge_chat_persona_then_character_first() -> None:
    def src(name: str, source: str, uid: int) -> SourcedBook:
        return SourcedBook(book(entry(uid, ["k"], f"{name}", order=100), name=name), source)  # type: ignore[arg-type]

    books = [src("g", "global", 1), src("c", "character", 2), src("p", "persona", 3), src("chat", "chat", 4)]
    # activation order: chat, persona, character, global; equal orders end reversed
    r = run(books, "k")
    assert uids(r) == [1, 2, 3, 4]
    gf = run(books, "k", settings=WorldInfoSettings(character_strategy=CharacterStrategy.GLOBAL_FIRST))
    assert uids(gf) == [2, 1, 3, 4]


def test_r2_4_strategy_sets_budget_priority() -> None:
    glob = SourcedBook(book(entry(1, ["k"], "w w w w w w", order=500), name="g"), "global")
    char = SourcedBook(book(entry(2, ["k"], "w w w w w w", order=10), name="c"), "character")
    limited = {"max_context": 40}  # 10 tokens: room for one entry
    assert uids(run([glob, char], "k", **limited)) == [2]
    even = WorldInfoSettings(character_strategy=CharacterStrategy.EVENLY)
    assert uids(run([glob, char], "k", settings=even, **limited)) == [1]


def test_r2_4_duplicate_books_are_loaded_once() -> None:
    shared = book(entry(1, ["k"]), name="World")
    r = run([SourcedBook(shared, "global"), SourcedBook(shared, "character"),
             SourcedBook(shared, "chat")], "k")
    assert uids(r) == [1]
    skipped = [b for b in r.diagnostics["books"] if b.get("skipped")]
    assert {(b["book"], b["source"]) for b in skipped} == {("World", "character"), ("World", "chat")}


def test_r2_4_compiled_books_are_cached_by_content() -> None:
    b = book(entry(1, ["k"]), name="cache-test")
    first = run(b, "k")
    again = run(book(entry(1, ["k"]), name="cache-test"), "k")
    changed = run(book(entry(1, ["k", "j"]), name="cache-test"), "k")
    assert again.diagnostics["index"]["cached"] is True
    assert changed.diagnostics["index"]["cached"] is False
    assert first.diagnostics["index"]["plain_keys"] == 1
