"""R11 `evacore bench`: discovery by file name, RESULTS.md with targets met or missed and each
figure's median and spread over repeated runs, only this run's figures in RESULTS.md (those of
benchmarks not run kept in RESULTS.json), quick runs kept apart, and a real quick smoke run of
the relay."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

from typer.testing import CliRunner

from evacore.cli import app
from evacore.cli.bench import default_bench_dir

BENCH = default_bench_dir()

_ALPHA = '''"""Alpha: a benchmark made for the runner's tests.

Must not: measure anything.
"""
VALUE = {value}


def run(quick: bool = False) -> list[dict]:
    return [
        {{"bench": "alpha", "metric": "speed", "value": VALUE, "unit": "x", "target": ">= 2",
          "met": VALUE >= 2, "note": "quick" if quick else "full"}},
        {{"bench": "alpha", "metric": "size", "value": 12345.678, "unit": "B", "target": None,
          "met": None, "note": "a | pipe"}},
    ]


def explain(rows: list[dict]) -> str:
    return "alpha is limited by " + str(rows[0]["value"])
'''

_BOOM = '''"""Boom: always fails."""


def run(quick: bool = False) -> list[dict]:
    raise RuntimeError("the boom benchmark broke")
'''


def _bench_dir(tmp_path: Path, value: float = 1.5) -> Path:
    folder = tmp_path / "bench"
    folder.mkdir(exist_ok=True)
    for name in ("runner.py", "_report.py"):
        shutil.copy(BENCH / name, folder / name)
    (folder / "bench_alpha.py").write_text(_ALPHA.format(value=value))
    (folder / "bench_boom.py").write_text(_BOOM)
    (folder / "helper.py").write_text("raise SystemExit('not a benchmark')\n")
    return folder


def test_r11_bench_writes_results_with_targets_and_keeps_failures(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path)
    out = tmp_path / "out" / "R.md"
    result = CliRunner().invoke(app, ["bench", "--bench-dir", str(folder), "--output", str(out)])
    assert result.exit_code == 1, result.output  # one benchmark failed
    text = out.read_text()
    assert "## alpha" in text and "## boom" in text and "helper" not in text
    assert "| speed | 1.50 | 1.50–1.50 (3 runs) | x | >= 2 | **missed** | full |" in text
    assert "| size | 12,346 | 12,346–12,346 (3 runs) | B |  |  | a \\| pipe |" in text
    assert "### What limits it\n\nalpha is limited by 1.5" in text
    assert "RuntimeError: the boom benchmark broke" in text
    assert "## Machine" in text and "usable cores" in text

    # Running one benchmark again replaces its figures; RESULTS.md shows only what this run
    # measured and names the others, whose last figures stay in the data file.
    (folder / "bench_alpha.py").write_text(_ALPHA.format(value=3))
    again = CliRunner().invoke(app, ["bench", "alpha", "--bench-dir", str(folder),
                                     "--output", str(out)])
    assert again.exit_code == 0, again.output
    text = out.read_text()
    assert "| speed | 3 | 3–3 (3 runs) | x | >= 2 | met | full |" in text
    assert "RuntimeError: the boom benchmark broke" not in text and "## boom" not in text
    assert "Not run by this command: boom (" in text and "`R.json`, not here" in text
    kept = json.loads((out.parent / "R.json").read_text())["benches"]
    assert "the boom benchmark broke" in kept["boom"]["error"]
    assert f"`evacore bench alpha --bench-dir {folder} --output {out}` — " in text


def test_r11_bench_quick_runs_never_replace_results_md(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path, value=2)
    result = CliRunner().invoke(app, ["bench", "alpha", "--quick", "--bench-dir", str(folder)])
    assert result.exit_code == 0, result.output
    assert not (folder / "RESULTS.md").exists()
    text = (folder / "RESULTS.quick.md").read_text()
    assert "| speed | 2 | 1 run | x | >= 2 | met | quick |" in text and "(quick variant)" in text


def test_r11_bench_lists_and_rejects_unknown_names(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path)
    listed = CliRunner().invoke(app, ["bench", "--list", "--bench-dir", str(folder)])
    assert listed.exit_code == 0 and listed.output.split() == ["alpha", "boom"]
    unknown = CliRunner().invoke(app, ["bench", "nope", "--bench-dir", str(folder)])
    assert unknown.exit_code == 2
    assert "unknown benchmark(s): nope" in unknown.output and "alpha, boom" in unknown.output


def test_r11_bench_without_a_bench_folder_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "--bench-dir", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "no benchmark folder" in result.output and "--bench-dir" in result.output


def test_r11_bench_quick_smoke_relays_through_a_real_server(tmp_path: Path) -> None:
    """The shipped benchmarks still run: the relay, the chat-length and the cold tours through
    a real `evacore serve` and the plugin dispatcher, quick variants, written to a temporary file."""
    results = BENCH / "RESULTS.md"
    before = results.read_bytes() if results.exists() else None
    out = tmp_path / "RESULTS.md"
    result = CliRunner().invoke(app, ["bench", "relay", "dispatch", "chat_length", "cold", "--quick",
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "## relay" in text and "## dispatch" in text and "## chat_length" in text
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1]
            for line in text.splitlines() if line.startswith("| ")}
    assert rows["s1_evacore_errors"] == "0" and rows["s1_direct_errors"] == "0"
    assert float(rows["s1_cpu_us_per_token"].replace(",", "")) > 0
    assert float(rows["rss_idle_mb"].replace(",", "")) > 10
    assert 0 < float(rows["idle_wakeups_per_s"]) <= 5  # an idle evacore sleeps
    assert float(rows["tour_cpu_ms_long_chat"].replace(",", "")) > 0
    # a long message is kept once, not in every later tour's record (800 characters each)
    assert 0 < float(rows["record_bytes_per_stored_message"].replace(",", "")) < 300
    assert "## cold" in text and float(rows["tour_cpu_ms_after_idle"].replace(",", "")) > 0
    assert float(rows["paced_5ms_floor_cpu_us_per_token"].replace(",", "")) > 0
    # the relay's paced token is judged on its own CPU: the paced tour twice as long less
    # the paced tour (no part of the tour in it), beside the bare relay's measured alike
    judged = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[4]
              for line in text.splitlines() if line.startswith("| ")}
    assert judged["cpu_us_per_paced_token_own"] == "<= 40 µs"
    assert judged["facade_cpu_us_per_paced_token_own"] == "<= 40 µs"
    assert judged["cpu_us_per_paced_token"] == ""  # the tour-inclusive figure, not judged
    for name in ("cpu_us_per_paced_token_own", "paced_floor_cpu_us_per_token_own",
                 "paced_parsing_floor_cpu_us_per_token_own"):
        assert rows[name].replace(",", "").lstrip("-").replace(".", "").isdigit(), rows[name]
    # a lone token's own CPU (a longer stream less a shorter one), beside the bare relay's
    assert float(rows["paced_2ms_evacore_marginal_cpu_us_per_token"].replace(",", "")) > 0
    assert float(rows["paced_2ms_floor_marginal_cpu_us_per_token"].replace(",", "")) > 0
    # and beside the least a relay keeping the stream contract does (the parsing floor)
    assert float(rows["paced_2ms_parsing_floor_marginal_cpu_us_per_token"].replace(",", "")) > 0
    # and its system calls: the bare relay reads each token once and writes it once
    assert 1 <= float(rows["paced_2ms_floor_marginal_syscalls_per_token"]) <= 3
    assert float(rows["paced_2ms_evacore_marginal_syscalls_per_token"]) > 0
    assert (results.read_bytes() if results.exists() else None) == before


def _load_client() -> ModuleType:
    return _module("_relay_client")


async def test_r11_bench_load_client_counts_tokens_and_cut_streams() -> None:
    """The relay's load client reads chunked keep-alive answers (markers split over chunks
    and reads), and a stream still open at the end is cut and counted as unfinished."""
    client = _load_client()
    pieces = [b"event: ", b"delta\nevent: delta\nevent: ", b"delta\nevent: delta\ndata: 1"]
    # a marker split across two chunks is not counted: two per answer
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    hanging: list[asyncio.StreamWriter] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            if b"/hang" in head:
                writer.write(b"d\r\nevent: delta\n\r\n")
                hanging.append(writer)
                return
            for i in range(0, len(body), 5):  # arrive in small reads
                writer.write(body[i:i + 5])
                await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        done = await client.run_plan({
            "host": "127.0.0.1", "port": port, "requests": ["GET / HTTP/1.1\r\n\r\n"],
            "marker": "event: delta", "concurrency": 2, "count": 5})
        assert (done["completed"], done["tokens"], done["errors"], done["unfinished"]) == (5, 10, 0, 0)
        assert all(0 <= t <= total for t, total in zip(done["ttft"], done["total"], strict=True))
        cut = await client.run_plan({
            "host": "127.0.0.1", "port": port, "requests": ["GET /hang HTTP/1.1\r\n\r\n"],
            "marker": "event: delta", "concurrency": 3, "seconds": 0.1, "grace": 0.2})
        assert (cut["completed"], cut["unfinished"], cut["tokens"], cut["errors"]) == (0, 3, 3, 0)
    finally:
        for writer in hanging:
            writer.close()
        server.close()


def test_r11_bench_figures_are_medians_with_their_spread_over_runs(tmp_path: Path) -> None:
    """A benchmark whose figure differs between runs is shown by its median and min-max, and
    its target is judged on the median, not on the last run."""
    folder = _bench_dir(tmp_path)
    for name in ("bench_alpha.py", "bench_boom.py"):
        (folder / name).unlink()
    (folder / "bench_drift.py").write_text('''"""Drift: a figure that changes per run."""
SEEN = []


def run(quick: bool = False) -> list[dict]:
    SEEN.append(1)
    value = {1: 9.0, 2: 1.0, 3: 4.0}[len(SEEN)]
    return [{"bench": "drift", "metric": "ms", "value": value, "unit": "ms",
             "target": "<= 5 ms", "met": value <= 5, "note": f"run {len(SEEN)}"}]
''')
    out = tmp_path / "R.md"
    result = CliRunner().invoke(app, ["bench", "--bench-dir", str(folder), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "| ms | 4.00 | 1.00–9.00 (3 runs) | ms | <= 5 ms | met | run 3 |" in out.read_text()


def test_r11_bench_an_exact_target_must_hold_in_every_run(tmp_path: Path) -> None:
    """`= 0` errors is missed when any run had an error, even if the median is 0; a target the
    module left unjudged stays unjudged."""
    folder = _bench_dir(tmp_path)
    for name in ("bench_alpha.py", "bench_boom.py"):
        (folder / name).unlink()
    (folder / "bench_errs.py").write_text('''"""Errs: one run of three has an error."""
SEEN = []


def run(quick: bool = False) -> list[dict]:
    SEEN.append(1)
    errors = 1 if len(SEEN) == 2 else 0
    return [{"bench": "errs", "metric": "errors", "value": errors, "unit": "errors",
             "target": "= 0", "met": errors == 0, "note": f"run {len(SEEN)}"},
            {"bench": "errs", "metric": "p99", "value": 900.0, "unit": "µs",
             "target": "< 200 µs", "met": None, "note": "informative"}]
''')
    out = tmp_path / "R.md"
    result = CliRunner().invoke(app, ["bench", "--bench-dir", str(folder), "--output", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| errors | 0 | 0–1 (3 runs) | errors | = 0 | **missed** | run 2 |" in text
    assert "| p99 | 900.0 | 900.0–900.0 (3 runs) | µs | < 200 µs |  | informative |" in text


def test_r11_the_profile_counts_each_part_of_the_loops_samples() -> None:
    """bench_profile's shares: only samples of the event loop's thread count, a part's share
    holds every sample with one of its frames anywhere in the stack (the HTTP request's but
    those inside a stage), and the loop's own share is the samples whose innermost frame is
    the loop itself."""
    spec = importlib.util.spec_from_file_location("bench_profile_shares", BENCH / "bench_profile.py")
    assert spec is not None and spec.loader is not None
    profile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile)
    loop = "main (x.py:1);Runner.run (asyncio/runners.py:118)"
    raw = "\n".join([
        f"{loop};TourManager._run (m.py:3);Save.run (save.py:40);redact_json (r.py:9) 30",
        f"{loop};TourManager._run (m.py:3);UserInput.run (u.py:7) 20",
        f"{loop};RequestResponseCycle.run_asgi (h.py:2);solve_dependencies (f.py:5) 10",
        f"{loop} 40",
        "Thread._bootstrap (threading.py:1);_connection_worker_thread (a.py:2) 500",
        "Session.execute (sqlalchemy/orm/session.py:2);Session._execute_internal (s.py:3) 25",
    ])
    total, parts = profile.shares(raw)
    assert total == 125  # the greenlet's samples are the loop thread's; the worker's are not
    assert parts["orm_in_greenlets"] == parts["orm_sessions"] == 20.0
    raw = "\n".join(raw.splitlines()[:-1])
    total, parts = profile.shares(raw)
    assert total == 100
    assert parts["stage_14_save"] == parts["diagnostics_redaction"] == 30.0
    assert parts["stage_01_user_input"] == 20.0
    assert parts["http_request"] == parts["fastapi_dependencies"] == 10.0
    assert parts["loop_own"] == 40.0
    assert parts["fast_lane"] == 0.0
    # a stage run in the request's turn (the tour's first step) counts as that stage only
    raw = f"{loop};RequestResponseCycle.run_asgi (h.py:2);Macros.run (m.py:4) 10"
    total, parts = profile.shares(raw)
    assert parts["stage_02_macros"] == 100.0 and parts["http_request"] == 0.0


def test_r11_the_native_profile_groups_perfs_libraries() -> None:
    """bench_profile's native split: each line of `perf report --sort dso` counts for the
    part that names its library; the rest is `other`."""
    spec = importlib.util.spec_from_file_location("bench_profile_native", BENCH / "bench_profile.py")
    assert spec is not None and spec.loader is not None
    profile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile)
    report = "\n".join([
        "    54.68%  libpython3.11.so.1.0", "    26.86%  [kernel.kallsyms]",
        "     6.58%  libc.so.6", "     3.79%  loop.cpython-311-x86_64-linux-gnu.so",
        "     2.66%  libsqlite3.so.0.8.6", "     2.50%  orjson.cpython-311-x86_64-linux-gnu.so",
        "     1.25%  parser.cpython-311-x86_64-linux-gnu.so", "     0.42%  [vdso]",
        "     0.12%  _greenlet.cpython-311-x86_64-linux-gnu.so", "# a comment line",
    ])
    shares = profile.native_shares(report)
    assert shares["interpreter"] == 54.68
    assert round(shares["kernel"], 2) == 27.28
    assert shares["libc"] == 6.58 and shares["uvloop"] == 3.79 and shares["sqlite"] == 2.66
    assert round(shares["parsers"], 2) == 3.75
    assert shares["other"] == 0.12


def test_r11_the_instruction_counts_read_callgrinds_totals_and_calls() -> None:
    """bench_instructions reads a dump's total (its `summary:`/`totals:` line) and a
    function's instructions per call from `callgrind_annotate --tree=caller --inclusive=yes`:
    the function's own `*` line over the calls of every caller above it; a recursive copy
    (named with a `'`) is neither the function nor one of its callers."""
    spec = importlib.util.spec_from_file_location("bench_instructions_parse",
                                                  BENCH / "bench_instructions.py")
    assert spec is not None and spec.loader is not None
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    assert counts.totals("events: Ir\nsummary: 0\nfn=x\n1 5\ntotals: 123456\n") == 123456
    assert counts.totals("events: Ir\n") == 0
    annotated = "\n".join([
        "  9,000 (10.00%)  < /p/llhttp.c:llhttp__on_body (300x) [/x/parser.so]",
        "  1,000 ( 1.00%)  < /p/parser.c:other_caller (100x) [/x/parser.so]",
        "    500 ( 0.50%)  < /p/parser.c:parser_cb_on_body'2 (7x) [/x/parser.so]",
        " 10,000 (11.00%)  *  /p/parser.c:__pyx_f_parser_cb_on_body [/x/parser.so]",
        "",
        "  4,000 ( 4.00%)  *  /p/parser.c:__pyx_f_parser_cb_on_body'2 [/x/parser.so]",
    ])
    assert counts.inclusive_per_call(annotated, "parser_cb_on_body") == (10_000, 400)
    assert counts.inclusive_per_call(annotated, "uv_stream_on_read") is None


def test_r11_the_parsing_floor_relays_evacores_delta_events(tmp_path: Path) -> None:
    """The bare relay's parsing mode answers each streamed completion with evacore's `delta`
    events, one a token with its text, and a `done` event, over a kept-alive connection."""
    import httpx

    procs = _module("_relay_procs")
    _, load_prefix, _ = procs.pinning()
    upstream, upstream_url = procs.upstream(load_prefix, tmp_path, 3, 0)
    try:
        floor, url = procs.floor([], tmp_path, upstream_url, parse=True)
        try:
            with httpx.Client(timeout=30) as http:
                for _ in range(2):
                    r = http.post(url + "/v1/chat/completions", json={"stream": True})
                    assert r.status_code == 200
                    assert r.headers["content-type"] == "text/event-stream"
                    events = [e for e in r.text.split("\n\n") if e]
                    assert events == ['event: delta\ndata: {"text":" tok"}'] * 3 + [
                        "event: done\ndata: {}"]
        finally:
            floor.stop()
    finally:
        upstream.stop()


def _module(name: str) -> ModuleType:
    """The bench folder's module `name` (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
