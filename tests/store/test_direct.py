"""Pre-built statements run straight on the driver (store/direct.py) store exactly what
`session.execute` stores, in the caller's transaction, on every backend; errors keep
SQLAlchemy's classes; whoever listens to statements still sees every one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from evacore.core import Core
from evacore.store import direct
from evacore.store.sqlite_driver import OneTripConnection
from evacore.store.tables import Chat, Setting
from evacore.store.tables import Tour as TourRow

_tours = TourRow.__table__
_INSERT = insert(_tours)
_FINISH = (update(_tours).where(_tours.c.id == bindparam("p_id"), _tours.c.status == "running")
           .values(status=bindparam("p_status"), diagnostics=bindparam("p_diagnostics"),
                   abort_requested=bindparam("p_abort"))
           .returning(_tours.c.id))
_ADD_SETTING = insert(Setting.__table__)


async def _chat(core: Core) -> str:
    async with core.session() as s:
        chat = Chat(id=f"c-{datetime.now(UTC).timestamp()}", title="t")
        s.add(chat)
    return chat.id


def _tour(chat_id: str, tour_id: str) -> dict[str, Any]:
    return {"id": tour_id, "chat_id": chat_id, "user_id": None, "mode": "normal",
            "status": "running", "env": {"é": [1, 2.5, None], "nested": {"a": "ü"}},
            "diagnostics": {}, "instance_id": "i-1", "abort_requested": False,
            "created_at": datetime(2026, 12, 1, 12, 30, 45, 123456, tzinfo=UTC)}


async def _stored(core: Core, tour_id: str) -> tuple[Any, ...]:
    async with core.session() as s:
        row = (await s.execute(select(TourRow).where(TourRow.id == tour_id))).scalar_one()
        return (row.chat_id, row.mode, row.status, row.env, row.diagnostics,
                row.abort_requested, row.created_at.replace(tzinfo=None))


async def test_a_direct_insert_stores_what_session_execute_stores(core: Core) -> None:
    chat_id = await _chat(core)
    async with core.session() as s:
        await s.execute(_INSERT, _tour(chat_id, "t-orm"))
        assert not await direct.execute(s, _INSERT, _tour(chat_id, "t-direct"))
    assert await _stored(core, "t-direct") == await _stored(core, "t-orm")
    assert (await _stored(core, "t-direct"))[3] == {"é": [1, 2.5, None], "nested": {"a": "ü"}}


@pytest.mark.parametrize("when", [
    datetime(2026, 12, 1, 12, 30, 45, 123456, tzinfo=UTC),
    datetime(2026, 1, 1, tzinfo=UTC),  # no microseconds: still written with six zeros
    datetime(5, 1, 2, 3, 4, 5),  # a year below 1000, naive
    datetime(2026, 6, 1, 23, 59, 59, 1, tzinfo=timezone(timedelta(hours=5))),
])
async def test_a_date_written_directly_is_the_text_session_execute_writes(
    core: Core, when: datetime
) -> None:
    """The stored text itself, compared in the database (ordering and range queries on
    dates compare the text on SQLite)."""
    chat_id = await _chat(core)
    async with core.session() as s:
        await s.execute(_INSERT, {**_tour(chat_id, "t-orm"), "created_at": when})
        await direct.execute(s, _INSERT, {**_tour(chat_id, "t-direct"), "created_at": when})
    async with core.session() as s:
        stored = dict((await s.execute(
            select(_tours.c.id, text("CAST(created_at AS TEXT)")).select_from(_tours)
            .where(_tours.c.chat_id == chat_id))).all())
    assert stored["t-direct"] == stored["t-orm"]


async def test_an_update_returns_its_rows_and_honours_literals_in_its_where(core: Core) -> None:
    chat_id = await _chat(core)
    async with core.session() as s:
        await direct.execute(s, _INSERT, _tour(chat_id, "t-1"))
    params = {"p_id": "t-1", "p_status": "complete", "p_diagnostics": {"k": [True]},
              "p_abort": True}
    async with core.session() as s:
        assert [tuple(r) for r in await direct.execute(s, _FINISH, params)] == [("t-1",)]
    async with core.session() as s:  # no longer `running`: the literal in the WHERE holds
        assert list(await direct.execute(s, _FINISH, params)) == []
    _, _, status, _, diagnostics, abort_requested, _ = await _stored(core, "t-1")
    assert (status, diagnostics, abort_requested) == ("complete", {"k": [True]}, True)


_READ = (select(_tours.c.id, _tours.c.env, _tours.c.diagnostics, _tours.c.abort_requested,
                _tours.c.created_at, _tours.c.finished_at, _tours.c.user_id)
         .where(_tours.c.chat_id == bindparam("p_chat"), _tours.c.status == "running")
         .order_by(_tours.c.id).limit(5))


async def test_a_direct_select_reads_what_session_execute_reads(core: Core) -> None:
    """JSON, booleans, dates and NULLs come back as the columns' own types, the same values
    SQLAlchemy's execution gives, whichever path the backend takes."""
    chat_id = await _chat(core)
    async with core.session() as s:
        for tour_id in ("t-r1", "t-r2"):
            await direct.execute(s, _INSERT, _tour(chat_id, tour_id))
    async with core.session() as s:
        read = [tuple(r) for r in await direct.execute(s, _READ, {"p_chat": chat_id})]
        through_orm = [tuple(r) for r in (await s.execute(_READ, {"p_chat": chat_id})).all()]
    assert read == through_orm and len(read) == 2
    tour_id, env, diagnostics, abort_requested, created_at, finished_at, user_id = read[0]
    assert (tour_id, env, diagnostics) == ("t-r1", {"é": [1, 2.5, None], "nested": {"a": "ü"}},
                                           {})
    assert abort_requested is False and finished_at is None and user_id is None
    assert isinstance(created_at, datetime)
    assert created_at.replace(tzinfo=None) == datetime(2026, 12, 1, 12, 30, 45, 123456)


async def test_every_json_shape_reads_as_session_execute_reads_it(core: Core) -> None:
    """A JSON column of any shape, an old row's NaN, and a number SQLite holds as a number
    (written by hand, not as JSON text) read the same through the direct path."""
    chat_id = await _chat(core)
    shapes = [5, 2.5, "text", [1, "ü", None], {"a": {"b": [True]}}, None, True, [], {}, [], {}]
    async with core.session() as s:
        for i, env in enumerate(shapes):
            await direct.execute(s, _INSERT, {**_tour(chat_id, f"t-j{i:02d}"), "env": env})
        await direct.execute(s, _INSERT, _tour(chat_id, "t-jn"))
    if core.db.dialect == "sqlite":
        async with core.session() as s:
            await s.execute(text("UPDATE tours SET env = 7 WHERE id = 't-jn'"))
            await s.execute(text("UPDATE tours SET diagnostics = '{\"x\": NaN}' "
                                 "WHERE id = 't-j00'"))
    read_env = (select(_tours.c.id, _tours.c.env, _tours.c.diagnostics)
                .where(_tours.c.chat_id == bindparam("p_chat")).order_by(_tours.c.id))
    async with core.session() as s:
        read = [tuple(r) for r in await direct.execute(s, read_env, {"p_chat": chat_id})]
        through_orm = [tuple(r) for r in (await s.execute(read_env, {"p_chat": chat_id})).all()]
    assert repr(read) == repr(through_orm)  # NaN != NaN: compared as written out
    assert [env for _, env, _ in read[:len(shapes)]] == shapes
    empties = [env for _, env, _ in read[7:len(shapes)]]  # each row's own, not one shared
    assert len({id(env) for env in empties}) == 4
    if core.db.dialect == "sqlite":
        assert read[-1][1] == 7 and repr(read[0][2]) == "{'x': nan}"


async def test_a_failed_statement_is_an_integrity_error_and_rolls_back(core: Core) -> None:
    with pytest.raises(IntegrityError):
        async with core.session() as s:
            await direct.execute(s, _ADD_SETTING, {"key": "dup", "value": {"v": 1},
                                                   "updated_at": datetime.now(UTC)})
            await direct.execute(s, _ADD_SETTING, {"key": "dup", "value": {"v": 2},
                                                   "updated_at": datetime.now(UTC)})
    async with core.session() as s:
        assert await s.get(Setting, "dup") is None  # the first insert went with the rollback


async def test_a_write_the_recall_memory_watches_keeps_session_execute(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evacore.store.recall import recall

    async def load_value() -> Any:
        return await s.scalar(select(Setting.value).where(Setting.key == "watched"))

    async with core.session() as s:
        await s.execute(_ADD_SETTING, {"key": "watched", "value": {"v": 1},
                                       "updated_at": datetime.now(UTC)})
    async with core.session() as s:
        assert await recall(s, "settings", "watched", load_value) == {"v": 1}
    change = update(Setting.__table__).where(Setting.__table__.c.key == bindparam("p_key")) \
        .values(value=bindparam("p_value"), updated_at=bindparam("p_at"))
    async with core.session() as s:
        await direct.execute(s, change, {"p_key": "watched", "p_value": {"v": 2},
                                         "p_at": datetime.now(UTC)})
    async with core.session() as s:  # the write was seen: the remembered value is gone
        assert await recall(s, "settings", "watched", load_value) == {"v": 2}


async def test_sqlite_takes_one_driver_trip_unless_someone_listens(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the direct path is SQLite's")
    trips: list[str] = []
    run = OneTripConnection.run

    async def counted(self: OneTripConnection, sql: str, args: tuple[Any, ...]) -> list[Any]:
        trips.append(sql)
        return await run(self, sql, args)

    monkeypatch.setattr(OneTripConnection, "run", counted)
    chat_id = await _chat(core)
    async with core.session() as s:
        await direct.execute(s, _INSERT, _tour(chat_id, "t-a"))
    assert len(trips) == 1 and trips[0].startswith("INSERT INTO tours")

    seen: list[str] = []

    def note(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(core.engine.sync_engine, "before_cursor_execute", note)
    try:
        async with core.session() as s:
            await direct.execute(s, _INSERT, _tour(chat_id, "t-b"))
    finally:
        event.remove(core.engine.sync_engine, "before_cursor_execute", note)
    assert len(trips) == 1 and [q for q in seen if q.startswith("INSERT INTO tours")]
    assert (await _stored(core, "t-b"))[0] == chat_id


async def test_a_session_that_commits_midway_writes_each_part_in_its_own_transaction(
    core: Core
) -> None:
    """The connection a direct statement reuses is its transaction's: after a commit or a
    rollback the next statement runs in the session's next transaction, never in the ended
    one (a rolled-back write stays gone, a committed one stays)."""
    chat_id = await _chat(core)
    async with core.sessions() as s:
        await direct.execute(s, _INSERT, _tour(chat_id, "t-kept"))
        await s.commit()
        await direct.execute(s, _INSERT, _tour(chat_id, "t-dropped"))
        await s.rollback()
        await direct.execute(s, _INSERT, _tour(chat_id, "t-after"))
        await s.commit()
    async with core.session() as s:
        ids = set((await s.scalars(select(TourRow.id).where(TourRow.chat_id == chat_id))).all())
    assert ids == {"t-kept", "t-after"}


def test_a_row_reader_reads_every_row_as_the_one_row_reading_does() -> None:
    """The reader written out for a statement's columns gives what `_read` gives a row at a
    time: processed columns processed, NULLs left NULL, the rest as they came; a row of
    another width (not expected) takes `_read` itself."""
    columns = ((1, str.upper), (3, lambda v: v * 2))
    reader = direct._row_reader(4, columns)
    rows = [("a", "b", "c", 2), (None, None, None, None), ("x", "y", 0, 0.5)]
    assert reader(rows) == [direct._read(row, columns) for row in rows] == [
        ("a", "B", "c", 4), (None, None, None, None), ("x", "Y", 0, 1.0)]
    assert reader([]) == []
    wide = [("a", "b", "c", 2, "extra")]
    assert reader(wide) == [("a", "B", "c", 4, "extra")]
