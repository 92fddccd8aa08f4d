"""Where evacore's CPU goes: py-spy samples of the serving process's event-loop thread while
it answers one-token tours (everything a tour costs besides its tokens) and paced tours (200
tokens, 2 ms apart: a token's own path), each part's share of the samples.

py-spy samples only the thread holding the interpreter's lock (`--gil`): run plainly it
counts a waiting event loop as running, and idle waits (a paced stream's gaps between
tokens) filled the samples as the loop's "own" time. One-token tours are sampled with the
process stopped for each sample (py-spy's default): a stack read while the thread runs on is
often torn and dropped, more often in quick Python code than in one long C call, which
tilted the shares toward the latter (SQLite, regular expressions). Paced tours are sampled
without stopping (`--nonblocking`): stopped, a thread that holds the lock for a few tens of
µs per token was caught in a third of its CPU only. The `coverage` row says what share of
the loop thread's CPU (its scheduler account, which stopping the process inflates) the
samples stand for.

py-spy's picture of a paced token is itself tilted: a stopped thread is caught at its next
return from the kernel, and a stack read while it runs is torn more often in quick Python
code, so the socket write's line draws more samples than its time. So the paced tours are
also sampled by `perf` (the kernel's cpu-clock, every thread of the process, no stop): the
share of the CPU spent in the kernel, in the interpreter running Python code, and in each
native library (uvloop, httptools, orjson, SQLite, libc), beside the same split for the bare
relay (`_relay_floor.py`) on the same paced stream; rows say so when perf is missing or may
not sample here. The one-token tours get the same native split (`tour1_native_*`): where a
tour's fixed part goes without py-spy's tilt toward the lines that end in a system call.

Must not: bind anything but loopback, download anything, or fail when py-spy or perf is
missing or may not attach (a row says so). py-spy's shares are inclusive and overlap (a
stage's share holds the SQL it runs); samples of other threads are left out (the thread of
aiosqlite and the embedder idle here).
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs
import httpx
from bench_chat_length import TOKEN, _Chats, _row
from bench_cold import FLOOR_BODY, _Target

REPEATS = 1
RATE = 250
"""Samples a second."""
TOURS, QUICK_TOURS = 300, 20
PACED_TOURS, QUICK_PACED_TOURS = 30, 1
PACED_TOKENS, PACED_DELAY_MS = 200, 2.0
NATIVE_RATE = 2000
"""perf's samples a second."""
PER_CHAT = 20
"""One-token tours per chat, as the relay benchmark's `tour1`: the history stays short."""
LOOP = "Runner.run (asyncio/runners.py"
"""The frame every sample of the event loop's thread holds (but those inside a greenlet)."""
GREENLET_ROOTS = ("Session.", "TransactionalContext.", "AsyncAdapt_")
"""How the stacks of SQLAlchemy's synchronous code run inside its greenlets begin."""

PARTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("http_request", ("RequestResponseCycle.run_asgi (",),
     ("the HTTP request through uvicorn, Starlette's and FastAPI's layers and the route (not "
      "the stages a request's turn runs when it starts the tour: they count as theirs)")),
    ("fastapi_dependencies", ("solve_dependencies (",),
     "FastAPI resolving a route's parameters (auth, body, core)"),
    ("stage_01_user_input", ("UserInput.run (",), "stage 1"),
    ("stage_02_macros", ("Macros.run (",), "stage 2"),
    ("stage_03_character", ("Character.run (",), "stage 3"),
    ("stage_04_lorebook", ("Lorebook.run (",), "stage 4"),
    ("stage_05_memory", ("Memory.run (",), "stage 5"),
    ("stage_06_token_count", ("TokenCount.run (",), "stage 6"),
    ("stage_07_context_shift", ("ContextShift.run (",), "stage 7"),
    ("stage_08_interceptors", ("Interceptors.run (",), "stage 8"),
    ("stage_09_instruct", ("Instruct.run (",), "stage 9"),
    ("stage_10_12_request_stream", ("Serialize.run (", "Request.run (", "Streaming.run ("),
     "stages 10-12 (serialize, request, streaming) run by the tour's task"),
    ("stage_13_postprocess", ("PostProcess.run (",), "stage 13"),
    ("stage_14_save", ("Save.run (",), "stage 14"),
    ("orm_sessions", ("Database.session (", "greenlet_spawn (", "connect_now ("),
     ("SQLAlchemy's sessions: opening, committing and closing them, taking their pooled "
      "connections, its greenlet hops and the synchronous code run inside them")),
    ("sqlite_statements", ("OneTripConnection.run (", "OneTripConnection._trip (",
                           "OneTripConnection.commit ("),
     "SQLite statements and commits run by the driver"),
    ("diagnostics_redaction", ("redact_json (",), "redacting the stored diagnostics"),
    ("fast_lane", ("_Conn.data_received (",),
     "a token's path from the upstream read to the client's socket (the fast lane)"),
)

STAGES = frozenset(name for name, _, _ in PARTS if name.startswith("stage_"))


def _py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def _in_greenlet(stack: str) -> bool:
    """A stack of SQLAlchemy's synchronous code run inside one of its greenlets on the loop's
    thread: py-spy samples it apart from the coroutine that awaits it, rooted in the ORM."""
    return stack.startswith(GREENLET_ROOTS)


def shares(raw: str) -> tuple[int, dict[str, float]]:
    """(samples of the loop's thread, each part's share of them in %) from py-spy's raw
    output (`frame;frame;… count` a line). `loop_own` is the share whose innermost Python
    frame is the loop itself: uvloop's C code and the system calls it makes. Samples inside
    SQLAlchemy's greenlets count for the loop's thread and for `orm_sessions` (and
    `orm_in_greenlets`), though not for the stage that awaited them."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        greenlet = _in_greenlet(stack)
        if LOOP not in stack and not greenlet:
            continue
        samples = int(n)
        total += samples
        frames = stack.split(";")
        if greenlet:
            counts["orm_in_greenlets"] += samples
            counts["orm_sessions"] += samples
            continue
        if LOOP in frames[-1]:
            counts["loop_own"] += samples
        found = {name for name, marks, _ in PARTS
                 if any(mark in frame for frame in frames for mark in marks)}
        if found & STAGES:  # a stage run in the request's turn (the tour's first step)
            found.discard("http_request")
        for name in found:
            counts[name] += samples
    return total, {name: 100.0 * counts[name] / total for name in
                   ("loop_own", *(p[0] for p in PARTS), "orm_in_greenlets")} if total else {}


def _tours(chats: _Chats, tours: int) -> None:
    """One-token or paced tours, a new chat every `PER_CHAT`."""
    chat = chats.new()
    for i in range(tours):
        if i and i % PER_CHAT == 0:
            chat = chats.new()
        chats.tour(chat)


def _profile(spy: str, tokens: int, delay_ms: float, tours: int, folder: Path,
             flags: tuple[str, ...]
             ) -> tuple[int, dict[str, float], float, str | None]:
    server_prefix, load_prefix, _ = procs.pinning()
    up, upstream = procs.upstream(load_prefix, folder, tokens, delay_ms)
    server, url = procs.server(server_prefix, folder, TOKEN)
    out = folder / f"profile-{tokens}-{delay_ms:g}.txt"
    try:
        chats = _Chats(url, upstream, max_tokens=2 * tokens)
        _tours(chats, 10)  # warm: routes, statements and caches as a running server has them
        recorder = subprocess.Popen(
            [spy, "record", "--rate", str(RATE), "--format", "raw", "-o", str(out),
             "--pid", str(server.pid), *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        if recorder.poll() is not None:
            return 0, {}, 0.0, (recorder.stderr.read() if recorder.stderr else "").strip()[:200]
        before = _loop_thread_ns(server.pid)
        _tours(chats, tours)
        loop_cpu = (_loop_thread_ns(server.pid) - before) / 1e9
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=60)
        chats.http.close()
    finally:
        server.stop()
        up.stop()
    if not out.exists():
        return 0, {}, 0.0, "py-spy wrote no profile"
    total, parts = shares(out.read_text())
    return total, parts, loop_cpu, None


NATIVE_PARTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("kernel", ("[kernel.kallsyms]", "[unknown]", "[vdso]"),
     ("the kernel: system calls (socket reads and writes, epoll, SQLite's file writes), "
      "wake-ups and interrupts")),
    ("interpreter", ("libpython", "python3"),
     "the interpreter running Python code (evacore's, the libraries', asyncio's)"),
    ("uvloop", ("loop.cpython", "_asyncio.cpython"), "the event loop's C code (uvloop, asyncio)"),
    ("parsers", ("parser.cpython", "orjson", "_pydantic_core"),
     "C parsers and serializers: httptools, orjson, pydantic-core"),
    ("sqlite", ("libsqlite3", "_sqlite3"), "SQLite's library"),
    ("libc", ("libc.so", "libm.so", "ld-linux"),
     "the C library (memory, strings, system call wrappers)"),
)


def _perf() -> str | None:
    return shutil.which("perf")


def native_shares(report: str) -> dict[str, float]:
    """Each part's share of the samples (%) from `perf report --sort dso` (a line: `12.34%
    dso`); what no part names counts as `other`."""
    out = dict.fromkeys([name for name, _, _ in NATIVE_PARTS] + ["other"], 0.0)
    for line in report.splitlines():
        share, _, dso = line.strip().partition("%")
        try:
            value = float(share)
        except ValueError:
            continue
        dso = dso.strip()
        name = next((n for n, marks, _ in NATIVE_PARTS if any(m in dso for m in marks)),
                    "other")
        out[name] += value
    return out


def _perf_record(perf: str, pid: int, out: Path, work: Any) -> dict[str, float] | str:
    """The native split of `pid`'s CPU while `work()` runs, or why there is none."""
    recorder = subprocess.Popen(
        [perf, "record", "-e", "cpu-clock", "-F", str(NATIVE_RATE), "-p", str(pid), "-o",
         str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    if recorder.poll() is not None:
        return (recorder.stderr.read() if recorder.stderr else "").strip()[:200]
    work()
    recorder.send_signal(signal.SIGINT)
    recorder.wait(timeout=60)
    report = subprocess.run([perf, "report", "-i", str(out), "--sort", "dso", "--stdio",
                             "-q", "-g", "none"], capture_output=True, text=True, timeout=120,
                            check=False)
    shares = native_shares(report.stdout)
    if not sum(shares.values()):
        return (report.stderr or "perf recorded no samples").strip()[:200]
    return shares


def _native(perf: str, tours: int, one_token_tours: int, folder: Path
            ) -> tuple[dict[str, float], dict[str, float], dict[str, float]] | str:
    """perf's split for evacore's paced tours, for the bare relay's same streams and for
    evacore's one-token tours (a tour's fixed part)."""
    server_prefix, load_prefix, _ = procs.pinning()
    up, upstream = procs.upstream(load_prefix, folder, PACED_TOKENS, PACED_DELAY_MS)
    one, one_url = procs.upstream(load_prefix, folder, 1, 0.0)
    server, url = procs.server(server_prefix, folder, TOKEN)
    floor, floor_url = procs.floor(server_prefix, folder, upstream)
    try:
        chats = _Chats(url, upstream, max_tokens=2 * PACED_TOKENS)
        _tours(chats, 3)
        evacore = _perf_record(perf, server.pid, folder / "perf-evacore.data",
                               lambda: _tours(chats, tours))
        chats.http.close()
        short = _Chats(url, one_url, name="bench-profile-one")
        _tours(short, 10)
        fixed = _perf_record(perf, server.pid, folder / "perf-evacore-one.data",
                             lambda: _tours(short, one_token_tours))
        short.http.close()

        with httpx.Client(timeout=120) as http:
            relay = _Target(http, floor.pid, floor_url + "/v1/chat/completions", FLOOR_BODY)
            bare = _perf_record(perf, floor.pid, folder / "perf-floor.data",
                                lambda: [relay.once() for _ in range(tours)])
    finally:
        floor.stop()
        server.stop()
        one.stop()
        up.stop()
    for split in (evacore, bare, fixed):
        if isinstance(split, str):
            return split
    return evacore, bare, fixed  # type: ignore[return-value]


def _loop_thread_ns(pid: int) -> int:
    """CPU nanoseconds of the process's main thread (the event loop's), from its schedstat."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0])


def run(quick: bool = False) -> list[dict[str, Any]]:
    spy = _py_spy()
    if spy is None:
        return [_row("py_spy", None, "", "py-spy is not installed (`pip install py-spy`): "
                     "no profile taken")]
    rows: list[dict[str, Any]] = []
    notes = {"loop_own": "the loop's own C code (uvloop) and its system calls",
             **{name: note for name, _, note in PARTS},
             "orm_in_greenlets": "SQLAlchemy's synchronous code inside its greenlets (sampled "
             "apart from the stage that awaited it; part of orm_sessions)"}
    scenarios = (("tour1", 1, 0.0, QUICK_TOURS if quick else TOURS,
                  "one-token tours, a new chat every 20", ("--gil",)),
                 ("paced", PACED_TOKENS, PACED_DELAY_MS,
                  QUICK_PACED_TOURS if quick else PACED_TOURS,
                  "200-token tours, a token every 2 ms", ("--gil", "--nonblocking")))
    with tempfile.TemporaryDirectory(prefix="evacore-bench-profile-") as tmp:
        for name, tokens, delay, tours, what, flags in scenarios:
            folder = Path(tmp) / name
            folder.mkdir()
            total, parts, loop_cpu, failed = _profile(spy, tokens, delay, tours, folder,
                                                      flags)
            if failed is not None:
                return [_row("py_spy", None, "", f"py-spy could not profile: {failed}")]
            rows.append(_row(f"{name}_samples", total, "samples",
                             f"{tours} {what}; the event loop's thread, {RATE} a second"))
            rows.append(_row(f"{name}_coverage",
                             round(100.0 * total / (loop_cpu * RATE), 1) if loop_cpu else None,
                             "%", f"the samples over the loop thread's CPU ({loop_cpu:.2f} s) "
                             f"times {RATE} a second: the share of its CPU they stand for"))
            rows += [_row(f"{name}_share_{part}", round(share, 1), "%",
                          f"{notes[part]}; {what}") for part, share in parts.items()]
        perf = _perf()
        native = (_native(perf, QUICK_PACED_TOURS if quick else PACED_TOURS,
                          QUICK_TOURS if quick else TOURS, Path(tmp))
                  if perf else "perf is not installed (Debian's linux-perf)")
    if isinstance(native, str):
        return rows + [_row("native", None, "", f"no native split: {native}")]
    native_notes = {**{name: note for name, _, note in NATIVE_PARTS},
                    "other": "every other library"}
    paced = f"{PACED_TOKENS}-token tours, a token every {PACED_DELAY_MS:g} ms; perf's cpu-clock"
    one_token = (f"{QUICK_TOURS if quick else TOURS} one-token tours, a new chat every "
                 f"{PER_CHAT}; perf's cpu-clock")
    for who, shares, whose, what in (
            ("paced", native[0], "evacore's process", paced),
            ("floor", native[1], "the bare relay's process, same stream", paced),
            ("tour1", native[2], "evacore's process", one_token)):
        rows += [_row(f"{who}_native_{part}", round(share, 1), "%",
                      f"{native_notes[part]}; {whose}; {what}")
                 for part, share in shares.items()]
    return rows


def explain(rows: list[dict[str, Any]]) -> str:
    values = {r["metric"]: r["value"] for r in rows}
    if "tour1_samples" not in values:
        return ""

    def top(scenario: str, n: int) -> str:
        parts = sorted(((v, k.removeprefix(f"{scenario}_share_")) for k, v in values.items()
                        if k.startswith(f"{scenario}_share_") and v is not None), reverse=True)
        return ", ".join(f"{name.replace('_', ' ')} {v:.0f}%" for v, name in parts[:n])

    text = ("**Where a tour's fixed cost goes** (py-spy, the event loop's thread, one-token "
            f"tours): {top('tour1', 8)}. No single part holds most of it: the cost is "
            "spread over the HTTP request, the stages, SQLAlchemy's sessions and the loop. "
            "**Where a paced token goes** (py-spy): "
            f"{top('paced', 4)}. The fast lane's share is a token's whole path from the "
            "upstream's read to the client's socket: evacore's parse, frame and checks and the "
            "socket write; py-spy gives the write's line more samples than its time (see the "
            "module's note).")
    fixed = {k: values.get(f"tour1_native_{k}") for k in ("interpreter", "kernel", "sqlite",
                                                          "libc", "parsers")}
    if all(isinstance(v, int | float) for v in fixed.values()):
        text += (f" **Native split of the one-token tours** (perf, every thread, no stop): "
                 f"{fixed['interpreter']:g}% the interpreter running Python code, "
                 f"{fixed['kernel']:g}% the kernel (the sockets, SQLite's file writes), "
                 f"{fixed['sqlite']:g}% SQLite's library, {fixed['libc']:g}% the C library "
                 f"and {fixed['parsers']:g}% the C parsers and serializers. py-spy stops the "
                 "process for each sample and reads the stack when the thread comes back "
                 "from the kernel, so it gives the lines that end in a system call (the "
                 "socket writes of the HTTP response) more samples than their time, which "
                 "inflates the `http_request` share above; perf's split says the fixed part "
                 "is Python code (the stages, the request's handling, the save), not system "
                 "calls.")
    evacore = {k: values.get(f"paced_native_{k}") for k in ("kernel", "interpreter")}
    floor = {k: values.get(f"floor_native_{k}") for k in ("kernel", "interpreter")}
    if all(isinstance(v, int | float) for v in [*evacore.values(), *floor.values()]):
        text += (f" **Native split of the paced tours** (perf, every thread): evacore's CPU "
                 f"is {evacore['interpreter']:g}% the interpreter running Python code and "
                 f"{evacore['kernel']:g}% the kernel; the bare relay's, on the same stream, "
                 f"{floor['interpreter']:g}% and {floor['kernel']:g}%. So what evacore spends "
                 "per token beyond the bare relay is its own Python code (the parse, the "
                 "checks, the framing and the stages), not the system calls every relay makes.")
    return text
