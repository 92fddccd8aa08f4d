"""Test helpers: a real `evacore serve` process on loopback, free ports, waiting for health."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import httpx
import orjson


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m evacore serve` in a child process with its own data dir and database."""

    def __init__(self, data_dir: Path, db_url: str, token: str, *, args: tuple[str, ...] = (),
                 **env: str) -> None:
        self.args = args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "EVACORE_DATA_DIR": str(data_dir),
            "EVACORE_DATABASE_URL": db_url,
            "EVACORE_MASTER_TOKEN": token,
            "EVACORE_LOG_FORMAT": "json",
            **env,
        }
        self.token = token
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"server-{self.port}.log"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evacore", "serve", "--port", str(self.port), *self.args],
            env=self.env, stdout=out, stderr=out, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=15)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def served_on_sqlite(tmp_path_factory: Any, name: str, token: str) -> Iterator[ServerProcess]:
    """A module fixture's body: `evacore serve` on a fresh SQLite database in a folder of
    its own, killed at the end."""
    data = tmp_path_factory.mktemp(name)
    srv = ServerProcess(data / "data", f"sqlite+aiosqlite:///{data / 'evacore.db'}",
                        token).start()
    try:
        yield srv
    finally:
        srv.kill()


@contextlib.contextmanager
def server_pair(data_dir: Path, db_url: str, token: str) -> Iterator[tuple[ServerProcess,
                                                                             ServerProcess]]:
    """Two `evacore serve` processes on one database, started at once, killed at the end."""
    a = ServerProcess(data_dir / "a", db_url, token)
    b = ServerProcess(data_dir / "b", db_url, token)
    starters = [threading.Thread(target=s.start) for s in (a, b)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        yield a, b
    finally:
        a.kill()
        b.kill()


def parse_sse(body: str) -> list[tuple[str, Any]]:
    """`event:`/`data:` blocks of an SSE body as (name, data) pairs, in order."""
    events: list[tuple[str, Any]] = []
    for block in body.split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = orjson.loads(line[6:])
        if name:
            events.append((name, data))
    return events


def fixtures_dir() -> Path:
    """The shared real-world fixtures: `../shared/fixtures` next to the project's root
    (`EVACORE_FIXTURES` overrides)."""
    override = os.environ.get("EVACORE_FIXTURES")
    if override:
        return Path(override)
    here = Path(__file__).resolve().parent.parent
    for folder in (here, *here.parents):  # a clone placed elsewhere finds the nearest one
        candidate = folder.parent / "shared" / "fixtures"
        if candidate.is_dir():
            return candidate
    return Path("/work/shared/fixtures")  # the checkout's own neighbour on this machine


FIXTURES = fixtures_dir()


def memory_mib(pid: int) -> dict[str, float]:
    """`VmRSS` (resident now) and `VmHWM` (peak resident) of a process, in MiB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def reset_peak(pid: int) -> bool:
    """Lower a process's `VmHWM` to its current RSS (Linux `clear_refs` 5); False when the
    kernel refuses, so callers fall back to measuring against the RSS before."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakGrowth:
    """`with PeakGrowth(pid) as m: ...` → `m.mib`: how far the process's peak RSS rose above
    its RSS at the start, `m.peak`: that peak, and `m.seconds`: how long the block took.
    (Without `clear_refs` the peak is the process's lifetime peak: an overestimate.)"""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mib = 0.0
        self.peak = 0.0
        """The peak RSS during the block (MiB)."""
        self.seconds = 0.0

    def __enter__(self) -> Self:
        reset_peak(self.pid)
        self._before = memory_mib(self.pid)["VmRSS"]
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self._t0
        self.peak = memory_mib(self.pid)["VmHWM"]
        self.mib = self.peak - self._before


def drop_evacore_logging() -> None:
    """Take evacore's log handler (the one `configure_logging` adds) off the root logger."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_evacore", False):
            root.removeHandler(handler)
