"""R7: migrations create every table on an empty database and round-trip down and up."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from evacore.store import migrate
from evacore.store.db import create_engine
from evacore.store.tables import Base
from tests.conftest import _pg_admin_url, _pg_exec


async def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


async def _roundtrip(url: str) -> None:
    engine = create_engine(url)
    try:
        await migrate.upgrade(engine)
        expected = {t.name for t in Base.metadata.sorted_tables}
        assert expected <= await _tables(url)
        assert await migrate.current(engine) is not None
        await migrate.downgrade(engine, "base")
        assert await _tables(url) <= {"alembic_version"}
        await migrate.upgrade(engine)
        assert expected <= await _tables(url)
    finally:
        await engine.dispose()


async def test_r7_migrations_roundtrip_on_empty_sqlite(tmp_path) -> None:
    await _roundtrip(f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}")


async def test_r7_migrations_roundtrip_on_empty_postgresql() -> None:
    admin = _pg_admin_url()
    name = f"evacore_m_{uuid.uuid4().hex[:8]}"
    try:
        await _pg_exec(admin, f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001
        import os

        if os.environ.get("EVACORE_TEST_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    try:
        await _roundtrip(make_url(admin).set(database=name).render_as_string(hide_password=False))
    finally:
        await _pg_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_r7_sqlite_runs_in_wal_mode(tmp_path) -> None:
    from sqlalchemy import text

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}")
    try:
        async with engine.connect() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar()
            timeout = (await conn.execute(text("PRAGMA busy_timeout"))).scalar()
        assert mode == "wal" and int(timeout) >= 5000
    finally:
        await engine.dispose()


async def test_r7_downgrade_puts_stored_request_parts_back_into_the_tours(tmp_path) -> None:
    """Going below 0007 loses no request: each tour's record takes its tool definitions and
    its long messages back inline before their table goes."""
    from sqlalchemy import text

    url = f"sqlite+aiosqlite:///{tmp_path / 'parts.db'}"
    engine = create_engine(url)
    tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(3)]
    try:
        await migrate.upgrade(engine)
        async with engine.begin() as conn:
            await conn.execute(text(
                "INSERT INTO request_parts (digest, value, created_at)"
                " VALUES ('d1', :v, '2026-01-01')"), {"v": json.dumps(tools)})
            long_message = {"role": "assistant", "content": "A long answer. " * 60}
            await conn.execute(text(
                "INSERT INTO request_parts (digest, value, created_at)"
                " VALUES ('m1', :v, '2026-01-01')"), {"v": json.dumps(long_message)})
            short = {"role": "user", "content": "Hi."}
            diagnostics = {"requests": [{"step": 0, "body": {
                "model": "m", "tools": {"$request_part": "d1"},
                "messages": [short, {"$request_part": "m1"}, {"$request_part": "gone"}]}}]}
            await conn.execute(text(
                "INSERT INTO tours (id, mode, status, env, diagnostics, abort_requested,"
                " created_at) VALUES ('t1', 'normal', 'completed',"
                " '{}', :d, 0, '2026-01-01')"), {"d": json.dumps(diagnostics)})
        await migrate.downgrade(engine, "0006")
        assert "request_parts" not in await _tables(url)
        async with engine.connect() as conn:
            stored = (await conn.execute(text("SELECT diagnostics FROM tours"))).scalar_one()
        assert json.loads(stored)["requests"][0]["body"] == {
            "model": "m", "tools": tools,
            "messages": [short, long_message, {"$request_part": "gone"}]}
    finally:
        await engine.dispose()
