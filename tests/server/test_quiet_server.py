"""An idle `evacore serve` sleeps: its server loop and its pollers wake on one shared
clock, about once a second (uvicorn's own loop woke ten times a second), and it still
stops at once when told to."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
import uvicorn
from sqlalchemy import select

from evacore import ticks
from evacore.server import serving
from evacore.server.serving import QuietServer
from evacore.store.db import Database, create_engine
from evacore.store.tables import Instance
from tests.helpers import ServerProcess, free_port, served_on_sqlite

TOKEN = "quiet-master-token-0123456789abcdef"


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served_on_sqlite(tmp_path_factory, "quiet", TOKEN)


def _wakeups(pid: int, main_only: bool = False) -> int:
    """How many times the process's threads (or its main thread, the event loop's) went to
    sleep of their own accord (each such sleep ends in a wake-up); being preempted by a busy
    machine does not count."""
    total = 0
    tasks = Path(f"/proc/{pid}/task")
    for task in [tasks / str(pid)] if main_only else tasks.iterdir():
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        found = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.MULTILINE)
        total += int(found.group(1)) if found else 0
    return total


def test_an_idle_server_wakes_about_once_a_second(idle_server: ServerProcess) -> None:
    assert idle_server.proc is not None
    time.sleep(1.0)  # start-up's own work done
    before = _wakeups(idle_server.proc.pid)
    time.sleep(4.0)
    woke = _wakeups(idle_server.proc.pid) - before
    # the shared tick (4), the plugin sync (2) and the heartbeat (1) in the same passes,
    # a database thread hop each; uvicorn's own loop alone woke 40 times in as long
    assert woke <= 16, woke


def test_the_idle_server_still_answers_with_a_current_date(idle_server: ServerProcess) -> None:
    r = httpx.get(idle_server.url + "/v1/health", timeout=5)
    assert r.status_code == 200
    assert abs(parsedate_to_datetime(r.headers["date"]).timestamp() - time.time()) < 3


async def test_sigterm_stops_the_idle_server_cleanly(tmp_path: Path) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"
    srv = ServerProcess(tmp_path / "data", db_url, TOKEN).start()
    assert srv.proc is not None
    started = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    # uvicorn re-raises the signal once it has shut down: the process ends by it
    assert await asyncio.to_thread(srv.proc.wait, 15) in (0, -signal.SIGTERM)
    assert time.monotonic() - started < 10
    db = Database(create_engine(db_url))
    try:
        async with db.session() as s:  # its shutdown ran: it left the instance register
            assert (await s.scalars(select(Instance))).all() == []
    finally:
        await db.engine.dispose()


def _workers(pid: int) -> list[int]:
    """The worker processes of `evacore serve --workers` (spawned by uvicorn's supervisor)."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"spawn_main" in cmdline:
            found.append(int(child))
    return found


async def test_idle_workers_sleep_too_and_stop_cleanly(tmp_path: Path) -> None:
    """`--workers N` runs uvicorn's supervisor with quiet servers in its workers: a worker's
    event loop wakes about once a second (uvicorn's own server woke it ten times a second;
    the supervisor's health check, twice a second, wakes a thread of its own)."""
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"
    srv = ServerProcess(tmp_path / "data", db_url, TOKEN, args=("--workers", "2")).start()
    assert srv.proc is not None
    try:
        deadline = time.monotonic() + 20
        while len(workers := _workers(srv.proc.pid)) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            await asyncio.sleep(0.2)
        await asyncio.sleep(3.0)  # their start-up's own work done
        windows = []
        for _ in range(2):  # the quieter of two windows: a busy machine's start-up may linger
            before = {pid: _wakeups(pid, main_only=True) for pid in workers}
            await asyncio.sleep(3.0)
            windows.append({pid: _wakeups(pid, main_only=True) - before[pid]
                            for pid in workers})
        woke = {pid: min(w[pid] for w in windows) for pid in workers}
        # uvicorn's server alone woke a worker's loop 30 times in 3 s, in every window
        assert all(n <= 12 for n in woke.values()), windows
        srv.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(srv.proc.wait, 20) in (0, -signal.SIGTERM)
    finally:
        srv.kill()
    db = Database(create_engine(db_url))
    try:
        async with db.session() as s:  # both workers shut down: they left the register
            assert (await s.scalars(select(Instance))).all() == []
    finally:
        await db.engine.dispose()


async def _app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]


class _Embedded(QuietServer):
    """Without signal handlers (as the terminal's embedded server runs): uvicorn re-raises
    a signal it handled once it stops, which would end the test run."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _started(server: QuietServer) -> asyncio.Task[None]:
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done()
        await asyncio.sleep(0.01)
    return task


@pytest.mark.parametrize("how", ["should_exit", "signal"])
@pytest.mark.latency
async def test_told_to_stop_it_stops_at_once_not_at_its_next_tick(
        monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.setattr(serving, "TICK_SECONDS", 30.0)  # only the wake-up can stop it soon
    port = free_port()
    server = _Embedded(uvicorn.Config(_app, host="127.0.0.1", port=port, lifespan="off",
                                        log_config=None, access_log=False))
    task = await _started(server)
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ok"
    await asyncio.sleep(0.2)  # the main loop is asleep in its tick
    started = time.monotonic()
    if how == "signal":  # what uvicorn's signal handler does, from outside the loop
        threading.Thread(target=server.handle_exit, args=(signal.SIGTERM, None)).start()
    else:
        threading.Thread(target=setattr, args=(server, "should_exit", True)).start()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - started < 1.0


def test_pollers_wake_on_one_grid() -> None:
    # a half-second poller and a two-second one, asked at different moments, wake together
    half = 12.34 + ticks.until_next(12.34, 0.5)
    two = 12.71 + ticks.until_next(12.71, 2.0)
    assert half == pytest.approx(12.5) and two == pytest.approx(14.0)
    assert (two - 12.5) % 0.5 == pytest.approx(0.0)
    # woken a hair early, a poller waits for the next boundary, not for the one it just met
    assert ticks.until_next(13.999, 0.5) == pytest.approx(0.501)
    assert ticks.until_next(14.0, 0.5) == pytest.approx(0.5)
