"""Shared fixtures: a real database per backend (SQLite file, PostgreSQL), a Core, an API client.

Tests that use `core` (or anything built on it) run once per backend: `sqlite` always,
`postgresql` when `EVACORE_TEST_DATABASE_URL` points at a server (default: the local one);
`EVACORE_TEST_REQUIRE_POSTGRES=1` turns a missing server into a failure instead of a skip.
"""

from __future__ import annotations

import asyncio
import gc
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.store import migrate
from evacore.store.db import create_engine, is_sqlite
from evacore.store.tables import Base

MASTER_TOKEN = "evc_test_master_token_0123456789"
PG_DEFAULT = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


# The heavy end-to-end folders run on SQLite only: their storage goes through the same store
# code that the store, api, pipeline, memory, import, lore and durability tests run on both
# backends. A module opts in with `pytestmark = pytest.mark.both_backends`;
# EVACORE_TEST_ALL_BACKENDS=1 (set by .ci/run) runs everything on both.
SQLITE_ONLY_FOLDERS = ("generate", "agent_e2e", "assembly", "rules_integration", "telegram")
TESTS_DIR = Path(__file__).parent


@pytest.fixture(autouse=True)
def _latency_heap(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `latency` asserts a wall-clock bound on evacore's work (an abort within
    100 ms, a revocation within a second). What earlier tests left in this worker's heap is
    collected and frozen out of the collector's full passes first, as `evacore serve` freezes
    its start-up heap: a full pass over a long session's objects is not the code under test."""
    if request.node.get_closest_marker("latency") is None:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Where the fixtures must be there (`EVACORE_TEST_REQUIRE_FIXTURES=1`, set by CI), their
    absence stops the run at once instead of turning fixture tests into silent skips."""
    if os.environ.get("EVACORE_TEST_REQUIRE_FIXTURES") != "1":
        return
    from tests.helpers import FIXTURES

    wanted = ("cards", "worldinfo", "presets", "chats")
    missing = [name for name in wanted if not (FIXTURES / name).is_dir()
               or not any((FIXTURES / name).iterdir())]
    if missing:
        pytest.exit(f"the shared fixtures are required but {FIXTURES} lacks {missing}", 3)
    listed = listed_fixtures(FIXTURES)
    if not listed:
        pytest.exit(f"the shared fixtures are required but {FIXTURES}/SOURCES.md lists none", 3)
    gone = [name for name in listed if not (FIXTURES / name).is_file()]
    if gone:
        pytest.exit(f"the shared fixtures are required but {FIXTURES} lacks {gone}", 3)


def listed_fixtures(folder: Path) -> list[str]:
    """The fixture files SOURCES.md's table names (its first column, in backticks)."""
    try:
        text = (folder / "SOURCES.md").read_text(encoding="utf-8")
    except OSError:
        return []
    return [line.split("`", 2)[1] for line in text.splitlines() if line.startswith("| `")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        backends = BACKENDS
        folder = Path(str(metafunc.module.__file__)).relative_to(TESTS_DIR).parts[0]
        if (
            folder in SQLITE_ONLY_FOLDERS
            and metafunc.definition.get_closest_marker("both_backends") is None
            and os.environ.get("EVACORE_TEST_ALL_BACKENDS") != "1"
        ):
            backends = ("sqlite",)
        metafunc.parametrize("backend", backends, scope="session")


def _pg_admin_url() -> str:
    return os.environ.get("EVACORE_TEST_DATABASE_URL", PG_DEFAULT)


async def _pg_exec(url: str, sql: str) -> None:
    import asyncpg

    u = make_url(url)
    conn = await asyncpg.connect(
        host=u.host or "127.0.0.1", port=u.port or 5432, user=u.username or "postgres",
        password=u.password, database=u.database or "postgres", timeout=5,
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def db_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated database per backend for the whole session."""
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db') / 'evacore.db'}"
        asyncio.run(_migrate(url))
        yield url
        return
    admin = _pg_admin_url()
    name = f"evacore_t_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_pg_exec(admin, f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("EVACORE_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable: {exc}")
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    url = make_url(admin).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_migrate(url))
    yield url
    asyncio.run(_pg_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await migrate.upgrade(engine)
    finally:
        await engine.dispose()


async def wipe(url: str) -> None:
    """Empty every table so each test starts from a fresh, migrated database."""
    engine = create_engine(url)
    names = [t.name for t in reversed(Base.metadata.sorted_tables)]
    try:
        async with engine.begin() as conn:
            if is_sqlite(url):
                for name in names:
                    await conn.execute(text(f'DELETE FROM "{name}"'))
            else:
                joined = ", ".join(f'"{n}"' for n in names)
                await conn.execute(text(f"TRUNCATE {joined} CASCADE"))
    finally:
        await engine.dispose()


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=db_url,
        master_token=MASTER_TOKEN,
        log_format="json",
    )


@pytest.fixture
async def core(settings: Settings) -> AsyncIterator[Core]:
    await wipe(settings.db_url)
    c = await start_core(settings)
    try:
        yield c
    finally:
        await c.aclose()


@pytest.fixture
async def client(core: Core) -> AsyncIterator[httpx.AsyncClient]:
    """An API client authenticated as the master (pass other headers to act as someone else)."""
    from evacore.server.app import create_app

    app = create_app(core=core)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://evacore.test",
        headers={"Authorization": f"Bearer {MASTER_TOKEN}"},
        timeout=30,
    ) as c:
        yield c


async def make_user(client: httpx.AsyncClient, role: str, name: str | None = None) -> str:
    """Create a user through the API; returns its token."""
    r = await client.post("/v1/users", json={"name": name or role, "role": role})
    assert r.status_code == 201, r.text
    return r.json()["token"]
