"""R7, R2.4: a `Lorebook` saved as rows loads back equal; unlinking a target drops the books
only it used when asked to."""

from __future__ import annotations

import dataclasses

from evacore.core import Core
from evacore.formats.worldinfo import read_world_info
from evacore.store import lorebooks as store
from evacore.store.tables import Lorebook as BookRow
from tests.lore_integration._util import ELDORIA


async def test_r7_a_saved_book_loads_back_equal_and_orphans_leave_with_their_target(
    core: Core,
) -> None:
    book = read_world_info(ELDORIA.read_bytes(), name="Eldoria")
    first = book.entries[0]
    odd = dataclasses.replace(first, uid=-3, extra={**first.extra, "futureField": [1, {"a": 2}]})
    book = dataclasses.replace(book, entries=(*book.entries, odd), scan_depth=4, token_budget=90,
                               recursive_scanning=False, extensions={"x": 1})
    by_uid = dataclasses.replace(book, entries=tuple(sorted(book.entries, key=lambda e: e.uid)))
    async with core.session() as s:
        own = await store.save_lorebook(s, book, links=[("character", "c1")])
        shared = await store.save_lorebook(s, book, name="Shared",
                                           links=[("character", "c1"), ("global", None)])
    async with core.session() as s:
        assert await store.load_lorebook(s, own.id) == by_uid, "entries come back by uid"
        loaded = await store.load_lorebook(s, shared.id)
        assert loaded == dataclasses.replace(by_uid, name="Shared")
        assert await store.unlink_target(s, "character", "c1", drop_orphans=True) == [own.id,
                                                                                      shared.id]
    async with core.session() as s:
        assert await s.get(BookRow, own.id) is None, "a book linked nowhere else goes"
        assert await s.get(BookRow, shared.id) is not None, "a book still in use stays"
        assert [store.link_json(x) for x in (await store.links_of(s, [shared.id]))[shared.id]] == [
            {"target_kind": "global", "target_id": None}]
