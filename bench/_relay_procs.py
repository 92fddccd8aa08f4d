"""Processes for the relay benchmark: CPU pinning, the evacore server, the fake upstream and
(when installed) the LiteLLM proxy as child processes, their CPU time (nanoseconds, from
/proc/<pid>/task/*/schedstat) and RSS read from /proc, and the load client run.

Must not: bind anything but loopback, or leave a child running: every child is started in its
own session and ended by its own process id.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

import httpx

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def core_times(cpu: int | None) -> tuple[int, int]:
    """(busy, total) jiffies of one CPU (all CPUs when None), from /proc/stat."""
    name = "cpu" if cpu is None else f"cpu{cpu}"
    for line in Path("/proc/stat").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == name:
            values = [int(v) for v in fields[1:8]]
            idle = values[3] + values[4]  # idle + iowait
            return sum(values) - idle, sum(values)
    return 0, 0


def server_cpu() -> int | None:
    """The CPU evacore is pinned to (None when not pinned)."""
    prefix = pinning()[0]
    return int(prefix[-1]) if prefix else None


def pinning() -> tuple[list[str], list[str], str]:
    """(server prefix, load prefix, note): `taskset -c 0` / `-c 1` when there are 2+ CPUs."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2 and shutil.which("taskset"):
        a, b = cpus[0], cpus[1]
        return (["taskset", "-c", str(a)], ["taskset", "-c", str(b)],
                f"evacore pinned to CPU {a}; load client and fake upstream pinned to CPU {b}")
    return [], [], "not pinned (fewer than 2 CPUs or no taskset): figures are less clean"


def calibrate(rounds: int = 20000) -> float:
    """µs per json.dumps of a fixed 40-key dict, run on the server's CPU."""
    sample = {f"key{i}": [i, f"value {i}", {"n": i * 1.5}] for i in range(40)}

    def batch(n: int) -> None:
        for _ in range(n):
            json.dumps(sample)

    return _on_server_cpu(lambda: _best_us(batch, rounds))


def calibrate_wakeups(rounds: int = 2000) -> float:
    """µs per loopback echo round trip (asyncio, uvloop when installed) on the server's CPU:
    two socket writes, two reads and two wake-ups, what each relayed token also costs."""
    import asyncio

    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(64):
            writer.write(data)
        writer.close()

    async def trips(n: int) -> None:
        for _ in range(n):
            writer.write(b"x" * 32)
            await reader.readexactly(32)

    async def close() -> None:
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()

    server = loop.run_until_complete(asyncio.start_server(echo, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    reader, writer = loop.run_until_complete(asyncio.open_connection("127.0.0.1", port))
    try:
        return _on_server_cpu(lambda: _best_us(lambda n: loop.run_until_complete(trips(n)),
                                               rounds))
    finally:
        loop.run_until_complete(close())
        loop.close()


def _best_us(batch: Any, rounds: int) -> float:
    """µs per round of `batch(n)`, the best of five batches of `rounds / 5`."""
    n = max(1, rounds // 5)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        batch(n)
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def _on_server_cpu(work: Any) -> float:
    """`work()` with this process pinned to the server's CPU for its duration."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cpu = server_cpu()
    try:
        if cpus is not None and cpu is not None:
            os.sched_setaffinity(0, {cpu})
        return float(work())
    finally:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads, ended ones too), from /proc/<pid>/stat,
    in clock ticks: coarse (10 ms), kept only to check `cpu_ns` against."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def cpu_ns(pid: int) -> int:
    """Nanoseconds on a CPU of every live thread of the process: the first field of each
    /proc/<pid>/task/<tid>/schedstat (the scheduler's own account). A thread that ends
    takes its time with it: a window's CPU is measured with `CpuMark`, which keeps the
    threads apart."""
    return sum(ns for ns, _ in _threads(pid).values())


def syscalls(pid: int) -> int | None:
    """Read- and write-like system calls the process has made (`syscr` + `syscw` of
    /proc/<pid>/io: every socket read and write, not the event loop's waits); None where the
    kernel does not count them."""
    try:
        fields = dict(line.split(":", 1) for line in
                      Path(f"/proc/{pid}/io").read_text().splitlines() if ":" in line)
        return int(fields["syscr"]) + int(fields["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def _threads(pid: int) -> dict[str, tuple[int, int]]:
    """Each live thread's (nanoseconds on a CPU, times put on a CPU), by thread id."""
    out: dict[str, tuple[int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
            out[task.name] = (int(fields[0]), int(fields[2]))
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the read
    return out


class CpuMark:
    """A process's threads' scheduler counts at one moment; `since()` gives the CPU
    nanoseconds and the times put on a CPU of its threads from then on. A thread that ended
    meanwhile leaves out only its own part of the window (the difference of two sums over the
    live threads would drop all of its time, and comes out negative when a busy thread ends,
    such as a database thread closed after idling); one started meanwhile counts whole."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.threads = _threads(pid)

    def since(self) -> tuple[int, int]:
        ns = runs = 0
        for tid, (now_ns, now_runs) in _threads(self.pid).items():
            then_ns, then_runs = self.threads.get(tid, (0, 0))
            ns, runs = ns + now_ns - then_ns, runs + now_runs - then_runs
        return ns, runs


def sleeps(pid: int) -> int:
    """How many times the live threads of the process went to sleep of their own accord
    (`voluntary_ctxt_switches`): its wake-ups, without the preemptions a busy core adds."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found = re.search(r"^voluntary_ctxt_switches:\s+(\d+)",
                              (task / "status").read_text(), re.MULTILINE)
        except OSError:
            continue  # the thread ended between the listing and the read
        total += int(found.group(1)) if found else 0
    return total


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def settle(pid: int, *, quiet: float = 0.05, window: float = 0.5, limit: float = 30.0) -> None:
    """Wait until the process uses less than `quiet` of a core over `window` seconds
    (the tail of a scenario: aborted tours being saved), at most `limit` seconds."""
    deadline = time.monotonic() + limit
    last = cpu_ns(pid)
    while time.monotonic() < deadline:
        time.sleep(window)
        now = cpu_ns(pid)
        if now - last < quiet * window * 1e9:
            return
        last = now


class RssPeak:
    """Samples a process's RSS every `interval` seconds in a thread; `peak` is the maximum."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except OSError:
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class Child:
    """A child process in its own session with its output in a log file."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.argv, self.log, self.env = argv, log, env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The measured process: taskset execs the command, so the pid is the program's."""
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Self:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=out,
                                         start_new_session=True)
        return self

    def wait_http(self, url: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[-4:]} exited early:\n{self.tail()}")
            try:
                httpx.get(url, timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"{url} did not answer within {timeout:g} s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def error_lines(self, limit: int = 3) -> list[str]:
        """The last distinct error lines of the log, each cut to 300 characters; a JSON log
        line with a traceback as its event, the traceback's last frame and its exception."""
        if not self.log.exists():
            return []
        seen: list[str] = []
        for line in self.log.read_text(errors="replace").splitlines():
            low = line.lower()
            if '"error"' in low or "traceback" in low or "exception" in low:
                short = _short_error(line)[:300]
                if short not in seen:
                    seen.append(short)
        return seen[-limit:]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _short_error(line: str) -> str:
    """`event: exception (at the last frame)` for a JSON log line holding a traceback, else
    the line itself: a traceback's head says less than its end."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    trace = record.get("exception") if isinstance(record, dict) else None
    if not isinstance(trace, str) or not trace.strip():
        return line
    lines = [t.strip() for t in trace.strip().splitlines() if t.strip()]
    frames = [t for t in lines if t.startswith("File ")]
    where = f" ({frames[-1]})" if frames else ""
    return f"{record.get('event', 'error')}: {lines[-1]}{where}"


def upstream(prefix: list[str], folder: Path, tokens: int, delay_ms: float) -> tuple[Child, str]:
    """The fast fake upstream (bench/fake_upstream.py) as a pinned child; returns its /v1 URL."""
    port = free_port()
    child = Child([*prefix, sys.executable, str(HERE / "fake_upstream.py"), "--port", str(port),
                   "--tokens", str(tokens), "--delay-ms", str(delay_ms)],
                  folder / f"upstream-{port}.log").start()
    child.wait_http(f"http://127.0.0.1:{port}/")
    return child, f"http://127.0.0.1:{port}/v1"


def floor(prefix: list[str], folder: Path, upstream_url: str, *, parse: bool = False
          ) -> tuple[Child, str]:
    """The bare relay (bench/_relay_floor.py) in front of one fake upstream, pinned like
    evacore (`parse`: its parsing mode); returns its base URL."""
    port = free_port()
    up = upstream_url.rsplit(":", 1)[1].split("/", 1)[0]
    child = Child([*prefix, sys.executable, str(HERE / "_relay_floor.py"), "--port", str(port),
                   "--upstream", up, *(["--parse"] if parse else [])],
                  folder / f"floor-{port}.log").start()
    child.wait_http(f"http://127.0.0.1:{port}/")
    return child, f"http://127.0.0.1:{port}"


def server(prefix: list[str], folder: Path, token: str) -> tuple[Child, str]:
    """`python -m evacore serve` as a pinned child on a fresh SQLite data dir."""
    port = free_port()
    data = folder / "data"
    env = {**os.environ, "EVACORE_DATA_DIR": str(data),
           "EVACORE_DATABASE_URL": f"sqlite+aiosqlite:///{data / 'evacore.db'}",
           "EVACORE_MASTER_TOKEN": token, "EVACORE_LOG_LEVEL": "WARNING",
           "EVACORE_LOG_FORMAT": "json"}
    child = Child([*prefix, sys.executable, "-m", "evacore", "serve", "--port", str(port)],
                  folder / "server.log", env).start()
    url = f"http://127.0.0.1:{port}"
    child.wait_http(url + "/v1/health")
    return child, url


def load(prefix: list[str], plan: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run the load client (bench/_relay_client.py) pinned, the plan on stdin; its JSON result
    comes back in a temporary file."""
    with tempfile.TemporaryDirectory(prefix="evacore-bench-load-") as folder:
        out = Path(folder) / "result.json"
        done = subprocess.run([*prefix, sys.executable, str(HERE / "_relay_client.py"), "-"],
                              input=json.dumps({**plan, "out": str(out)}).encode(),
                              capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError("load client failed: "
                               + done.stderr.decode(errors="replace")[-2000:])
        return dict(json.loads(out.read_text()))


LITELLM_VENV = HERE / ".litellm-venv"
LITELLM_INSTALL = ("python3 -m venv bench/.litellm-venv && "
                   "bench/.litellm-venv/bin/pip install 'litellm[proxy]'")
"""The documented command that installs the LiteLLM proxy for the side-by-side run."""


def litellm_program() -> Path | None:
    """The `litellm` program of bench/.litellm-venv (or `EVACORE_BENCH_LITELLM`), if any."""
    override = os.environ.get("EVACORE_BENCH_LITELLM")
    program = Path(override) if override else LITELLM_VENV / "bin" / "litellm"
    return program if program.is_file() and os.access(program, os.X_OK) else None


def litellm_version(program: Path) -> str:
    python = program.parent / "python"
    try:
        code = "import importlib.metadata as m; print(m.version('litellm'))"
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                              timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown version"
    return done.stdout.strip()


def litellm(prefix: list[str], folder: Path, program: Path, models: dict[str, str],
            key: str) -> tuple[Child, str]:
    """The LiteLLM proxy as a pinned child: one model name per fake upstream (`models`: name
    -> /v1 base URL), a master key, no database, no telemetry, the local cost map."""
    port = free_port()
    lines = ["model_list:"]
    for name, base in models.items():
        lines += [f"  - model_name: {name}", "    litellm_params:",
                  "      model: openai/bench-model", f"      api_base: {base}",
                  "      api_key: sk-bench-upstream"]
    lines += ["general_settings:", f"  master_key: {key}", "litellm_settings:",
              "  telemetry: false", "  drop_params: true"]
    config = folder / "litellm.yaml"
    config.write_text("\n".join(lines) + "\n")
    # The fake upstream sends one token text over and over, which the proxy's guard against a
    # looping model would cut after 100 identical chunks: the guard is set past any answer.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR",
           "LITELLM_TELEMETRY": "False", "REPEATED_STREAMING_CHUNK_LIMIT": "1000000"}
    child = Child([*prefix, str(program.parent / "python"), str(program), "--config", str(config),
                   "--host", "127.0.0.1", "--port", str(port)],
                  folder / "litellm.log", env).start()
    url = f"http://127.0.0.1:{port}"
    child.wait_http(url + "/health/liveliness", timeout=240)
    return child, url
