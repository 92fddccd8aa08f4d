"""Benchmark the streaming relay: a fast fake OpenAI upstream streamed directly, through
evacore's generate (`POST /v1/chats/{id}/generate`) and through its OpenAI-compatible facade
(`POST /v1/chat/completions`, OpenAI chunks like the LiteLLM proxy's), an openai-chat
connection, no rules armed.

Must not: reach past loopback or leave a child process behind. evacore runs pinned to one
CPU, the load client and the fake upstream to the other (when there are two).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs

TOKEN = "bench-master-token-0123456789abcdef"
CPU_US_PER_TOKEN = 60.0
THROUGHPUT_RATIO = 0.90
ADDED_TTFT_MS = 5.0
IDLE_RSS_MB = 150.0
PER_STREAM_KB = 100.0
PROMPT = "Hello there, how are you today?"
WARM_TOURS = 5
"""Streamed tours before measuring: first uses (imports, caches, pools) are not steady state."""
LITELLM = "LiteLLM proxy 1.108.7 measured 595-806 µs/token on this machine"


@dataclass(frozen=True)
class Scenario:
    name: str
    concurrency: int
    tokens: int
    delay_ms: float
    count: int | None = None
    seconds: float | None = None

    def describe(self) -> str:
        span = f"{self.count} requests" if self.count else f"{self.seconds:g} s"
        pace = f"{self.delay_ms:g} ms apart" if self.delay_ms else "no delay"
        return f"{self.concurrency} concurrent, {self.tokens} tokens {pace}, {span}"


FULL = (Scenario("s1", 1, 200, 0, count=30), Scenario("long", 1, 2000, 0, count=4),
        Scenario("paced", 1, 200, 2, count=10),
        Scenario("s2", 64, 100, 5, seconds=20), Scenario("s3", 256, 100, 5, seconds=20))
QUICK = (Scenario("s1", 1, 200, 0, count=3), Scenario("long", 1, 1000, 0, count=1),
         Scenario("paced", 1, 50, 2, count=1),
         Scenario("s2", 2, 100, 5, seconds=0.5), Scenario("s3", 6, 100, 5, seconds=0.5))


def _request(path: str, port: int, body: dict[str, Any], token: str | None = None,
             headers: dict[str, str] | None = None) -> str:
    raw = json.dumps(body, separators=(",", ":"))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    auth += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(raw.encode())}\r\n\r\n{raw}")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float], q: float) -> float:
    return round(_pct(values, q) * 1000, 3)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


class _Setup:
    """Creates connections and chats over the evacore HTTP API."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url + "/v1", timeout=60,
                                 headers={"Authorization": f"Bearer {TOKEN}"})

    def connection(self, base_url: str, tokens: int, delay_ms: float) -> str:
        r = self.http.post("/connections", json={
            "name": _model_name(tokens, delay_ms), "kind": "openai-chat", "base_url": base_url,
            "model": "bench-model", "max_tokens": tokens * 2, "context_size": 65536})
        r.raise_for_status()
        return str(r.json()["id"])

    def chats(self, connection_id: str, n: int) -> list[str]:
        ids = []
        for i in range(n):
            r = self.http.post("/chats", json={"connection_id": connection_id,
                                               "title": f"bench {i}"})
            r.raise_for_status()
            ids.append(str(r.json()["id"]))
        return ids

    def warm(self, chat_id: str, tours: int = WARM_TOURS) -> None:
        for _ in range(tours):
            r = self.http.post(f"/chats/{chat_id}/generate",
                               json={"message": {"content": PROMPT}, "stream": True})
            r.raise_for_status()

    def warm_facade(self, chat_id: str, model: str, tours: int = WARM_TOURS) -> None:
        for i in range(tours):
            r = self.http.post("/chat/completions", json=_facade_body(model, i),
                               headers={"X-Evacore-Chat": chat_id})
            r.raise_for_status()


def _model_name(tokens: int, delay_ms: float) -> str:
    return f"bench-{tokens}-{delay_ms:g}"


def _facade_body(model: str, turn: int) -> dict[str, Any]:
    """One of two alternating messages: each request is a new turn of the stream's chat (the
    same message twice in a row would be a regenerate)."""
    return {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"{PROMPT} ({'ab'[turn % 2]})"}]}


def _plan(port: int, requests: list[str], marker: str, scenario: Scenario,
          error_marker: str | None) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "requests": requests, "marker": marker,
            "error_marker": error_marker, "concurrency": scenario.concurrency,
            "count": scenario.count, "seconds": scenario.seconds,
            "grace": max(5.0, (scenario.seconds or 0) / 2)}


def _relayed(load_prefix: list[str], server: procs.Child, plan: dict[str, Any],
             timeout: float) -> dict[str, Any]:
    """One scenario through evacore, with the server's CPU time, core load and RSS peak."""
    procs.settle(server.pid, window=0.25)
    core = procs.server_cpu()
    busy0 = procs.core_times(core)
    cpu0 = procs.cpu_seconds(server.pid)
    with procs.RssPeak(server.pid) as rss:
        relayed = procs.load(load_prefix, plan, timeout)
        procs.settle(server.pid, window=0.25)  # streams cut at the end are still being saved
    relayed["cpu_seconds"] = procs.cpu_seconds(server.pid) - cpu0
    busy1 = procs.core_times(core)
    relayed["core_busy"] = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    relayed["rss_peak"] = rss.peak
    if relayed["errors"]:
        relayed["error_samples"] += server.error_lines()
    return relayed


def _measure(load_prefix: list[str], server: procs.Child, scenario: Scenario,
             upstream_url: str, chat_ids: list[str], server_url: str,
             facade_chats: list[str]) -> dict[str, Any]:
    """The scenario against the upstream directly, then through generate and the facade."""
    timeout = (scenario.seconds or 0) + (scenario.count or 0) * 10 + 180
    direct_body = {"model": "bench-model", "stream": True,
                   "stream_options": {"include_usage": True},
                   "messages": [{"role": "user", "content": PROMPT}]}
    up_port = _port(upstream_url)
    direct = procs.load(load_prefix, _plan(
        up_port, [_request("/v1/chat/completions", up_port, direct_body)],
        '"content"', scenario, None), timeout)
    port = _port(server_url)
    requests = [_request(f"/v1/chats/{chat}/generate", port,
                         {"message": {"content": PROMPT}, "stream": True}, TOKEN)
                for chat in chat_ids]
    relayed = _relayed(load_prefix, server, _plan(port, requests, "event: delta", scenario,
                                                  "event: error"), timeout)
    model = "@" + _model_name(scenario.tokens, scenario.delay_ms)
    turns = [_request("/v1/chat/completions", port, _facade_body(model, turn), TOKEN,
                      {"X-Evacore-Chat": chat}) for chat in facade_chats for turn in (0, 1)]
    facade = _relayed(load_prefix, server, {
        **_plan(port, turns, '"delta":{"content"', scenario, 'data: {"error"'),
        "per_stream": 2}, timeout)
    return {"direct": direct, "evacore": relayed, "facade": facade}


def _row(metric: str, value: float | None, unit: str, note: str,
         target: str | None = None, met: bool | None = None) -> dict[str, Any]:
    return {"bench": "relay", "metric": metric, "value": value, "unit": unit,
            "target": target, "met": met, "note": note}


def _rate(r: dict[str, Any]) -> float:
    return r["completed"] / r["elapsed"] if r["elapsed"] else 0.0


def _cpu_per_tour_ms(scenario: Scenario, e: dict[str, Any]) -> float:
    return e["cpu_seconds"] * 1000 / e["completed"] if e["completed"] else float("nan")


def _scenario_rows(scenario: Scenario, result: dict[str, Any]) -> list[dict[str, Any]]:
    s, d = scenario.name, result["direct"]
    note = scenario.describe()
    rows: list[dict[str, Any]] = []
    for who, r in (("direct", d), ("evacore", result["evacore"]), ("facade", result["facade"])):
        if s != "long":
            rows.append(_row(f"{s}_{who}_streams_per_s", round(_rate(r), 2), "streams/s",
                             f"{note}; {r['completed']} streams in {r['elapsed']:.1f} s"))
        rows += [_row(f"{s}_{who}_ttft_p50_ms", _ms(r["ttft"], 0.5), "ms", note),
                 _row(f"{s}_{who}_ttft_p99_ms", _ms(r["ttft"], 0.99), "ms", note)]
        if s in ("s1", "long"):
            rows += [_row(f"{s}_{who}_total_p50_ms", _ms(r["total"], 0.5), "ms", note),
                     _row(f"{s}_{who}_total_p99_ms", _ms(r["total"], 0.99), "ms", note)]
        if r["unfinished"]:
            rows.append(_row(f"{s}_{who}_unfinished", r["unfinished"], "streams",
                             "still streaming when the client stopped waiting "
                             f"({r['elapsed']:.0f} s after the start); not counted as errors"))
        must_be_clean = s == "s3" and who != "direct"
        rows.append(_row(f"{s}_{who}_errors", r["errors"], "errors",
                         "; ".join(r["error_samples"]) or note,
                         "= 0" if must_be_clean else None,
                         r["errors"] == 0 if must_be_clean else None))
    rows += _target_rows(scenario, d, result["evacore"], "", "generate")
    rows += _target_rows(scenario, d, result["facade"], "facade_", "facade")
    return rows


def _target_rows(scenario: Scenario, d: dict[str, Any], e: dict[str, Any], prefix: str,
                 label: str) -> list[dict[str, Any]]:
    """Added TTFT, throughput, CPU per token and per tour of one route (generate: no prefix,
    the names the earlier results use; the facade: `facade_`)."""
    s = scenario.name
    rows: list[dict[str, Any]] = []
    what = "evacore" if label == "generate" else "the facade"
    if s != "long":
        added = (statistics.median(e["ttft"]) - statistics.median(d["ttft"])) * 1000 \
            if e["ttft"] and d["ttft"] else float("nan")
        judged = s in ("s1", "s2")
        rows.append(_row(f"{s}_{prefix}added_ttft_p50_ms", round(added, 3), "ms",
                         f"{what} TTFT p50 minus direct TTFT p50; includes the user-message "
                         "commit and prompt assembly" + ("" if label == "generate" else
                                                         " and the chat lookup"),
                         f"<= {ADDED_TTFT_MS:g} ms" if judged else None,
                         added <= ADDED_TTFT_MS if judged else None))
    if s in ("s2", "s3"):
        ratio = _rate(e) / _rate(d) if _rate(d) else float("nan")
        rows.append(_row(f"{s}_{prefix}throughput_vs_direct", round(ratio, 3), "x",
                         f"{what} streams/s over direct streams/s",
                         f">= {THROUGHPUT_RATIO:g}" if s == "s2" else None,
                         ratio >= THROUGHPUT_RATIO if s == "s2" else None))
    tokens = e["tokens"]
    per_token = e["cpu_seconds"] * 1e6 / tokens if tokens else float("nan")
    judged = s in ("s1", "s2", "s3")
    rows += [
        _row(f"{s}_{prefix}cpu_us_per_token", round(per_token, 1), "µs",
             f"evacore utime+stime {e['cpu_seconds']:.2f} s / {tokens} tokens relayed "
             f"({label}); "
             + (LITELLM if judged else "long answers: the per-tour cost is spread thin"
                if s == "long" else "one token per upstream read: no burst to batch"),
             f"<= {CPU_US_PER_TOKEN:g} µs" if judged else None,
             per_token <= CPU_US_PER_TOKEN if judged else None),
    ]
    if scenario.count:  # every request ran to its end: the CPU divides cleanly
        rows.append(_row(f"{s}_{prefix}cpu_ms_per_tour", round(_cpu_per_tour_ms(scenario, e), 2),
                         "ms", f"evacore CPU per {label} request with {scenario.tokens} tokens"))
    share = e["cpu_seconds"] / e["elapsed"] * 100 if e["elapsed"] else float("nan")
    rows.append(_row(f"{s}_{prefix or 'evacore_'}cpu_share", round(share, 1), "% of a core",
                     f"evacore's CPU time over the scenario's wall time; its core was busy "
                     f"{e['core_busy'] * 100:.0f}% of that time (the difference went to other "
                     "work on the machine)"))
    return rows


def _split_rows(results: dict[str, Any], scenarios: dict[str, Scenario], target: str = "evacore",
                prefix: str = "") -> list[dict[str, Any]]:
    """Per-tour and per-token CPU from two answer lengths (S1 and long, one stream each)."""
    short, long_ = scenarios["s1"], scenarios["long"]
    a = _cpu_per_tour_ms(short, results["s1"][target])
    b = _cpu_per_tour_ms(long_, results["long"][target])
    marginal = (b - a) * 1000 / (long_.tokens - short.tokens)
    fixed = a - marginal * short.tokens / 1000
    paced = []
    if "paced" in results and scenarios["paced"].count:
        sc = scenarios["paced"]
        per = (_cpu_per_tour_ms(sc, results["paced"][target]) - fixed) * 1000 / sc.tokens
        paced.append(_row(
            f"{prefix}cpu_us_per_paced_token", round(per, 1), "µs",
            f"(CPU per paced tour - cpu_ms_per_tour_fixed) / {sc.tokens}: a token that arrives "
            f"alone ({sc.delay_ms:g} ms apart, as in S2 and S3) is read, relayed and written "
            "by itself"))
    return [
        *paced,
        _row(f"{prefix}cpu_us_per_extra_token", round(marginal, 1), "µs",
             f"(CPU per {long_.tokens}-token tour - CPU per {short.tokens}-token tour) / "
             f"{long_.tokens - short.tokens}: the relay's own cost per token"),
        _row(f"{prefix}cpu_ms_per_tour_fixed", round(fixed, 2), "ms",
             f"CPU per {short.tokens}-token tour minus {short.tokens} x the per-token cost: "
             "everything a tour costs besides relaying tokens"),
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """S1-S3 (and long answers) direct vs through evacore; CPU, TTFT, throughput, RSS."""
    scenarios = QUICK if quick else FULL
    by_name = {sc.name: sc for sc in scenarios}
    server_prefix, load_prefix, pin_note = procs.pinning()
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="evacore-bench-relay-") as tmp:
        folder = Path(tmp)
        ups: dict[tuple[int, float], tuple[procs.Child, str]] = {}
        server: procs.Child | None = None
        try:
            for sc in scenarios:
                if (sc.tokens, sc.delay_ms) not in ups:
                    ups[(sc.tokens, sc.delay_ms)] = procs.upstream(
                        load_prefix, folder, sc.tokens, sc.delay_ms)
            server, url = procs.server(server_prefix, folder, TOKEN)
            rss_start = procs.rss_bytes(server.pid)
            setup = _Setup(url)
            connections = {key: setup.connection(base, *key) for key, (_, base) in ups.items()}
            chats = {sc.name: setup.chats(connections[(sc.tokens, sc.delay_ms)], sc.concurrency)
                     for sc in scenarios}
            facade_chats = {sc.name: setup.chats(connections[(sc.tokens, sc.delay_ms)],
                                                 sc.concurrency) for sc in scenarios}
            s1 = by_name["s1"]
            setup.warm(setup.chats(connections[(s1.tokens, 0)], 1)[0])
            setup.warm_facade(setup.chats(connections[(s1.tokens, 0)], 1)[0],
                              "@" + _model_name(s1.tokens, 0))
            setup.http.close()
            rss_idle = procs.rss_bytes(server.pid)
            speed_before = procs.calibrate()
            wakeups_before = procs.calibrate_wakeups()
            for sc in scenarios:
                results[sc.name] = _measure(load_prefix, server, sc, ups[(sc.tokens,
                                            sc.delay_ms)][1], chats[sc.name], url,
                                            facade_chats[sc.name])
                rows += _scenario_rows(sc, results[sc.name])
        except Exception as exc:
            log = server.tail() if server is not None else ""
            raise RuntimeError(f"relay bench failed: {exc}\n{log}") from exc
        finally:
            if server is not None:
                server.stop()
            for child, _ in ups.values():
                child.stop()
        speed_after = procs.calibrate()
        wakeups_after = procs.calibrate_wakeups()
    rows += _split_rows(results, by_name)
    rows += _split_rows(results, by_name, "facade", "facade_")
    s2, s3 = by_name["s2"], by_name["s3"]
    peak2, peak3 = results["s2"]["evacore"]["rss_peak"], results["s3"]["evacore"]["rss_peak"]
    extra_kb = (peak3 - peak2) / (s3.concurrency - s2.concurrency) / 1024
    mb = 1024 * 1024
    rows += [
        _row("rss_idle_mb", round(rss_idle / mb, 1), "MB",
             f"after start, setup and {WARM_TOURS} warm-up tours ({rss_start / mb:.1f} MB right after start)",
             f"<= {IDLE_RSS_MB:g} MB", rss_idle / mb <= IDLE_RSS_MB),
        _row("rss_per_extra_stream_kb", round(extra_kb, 1), "KB",
             f"(peak RSS in S3 - peak RSS in S2) / {s3.concurrency - s2.concurrency} extra "
             f"streams; peaks {peak2 / mb:.1f} MB and {peak3 / mb:.1f} MB",
             f"<= {PER_STREAM_KB:g} KB", extra_kb <= PER_STREAM_KB),
        _row("litellm_proxy", None, "", _litellm_note()),
        _row("pinning", None, "", pin_note),
        _row("machine_speed_us", round((speed_before + speed_after) / 2, 2), "µs",
             f"a fixed pure-Python workload (json.dumps of a 40-key dict) on evacore's CPU, "
             f"before and after the scenarios: {speed_before:.2f} and {speed_after:.2f} µs. "
             "It follows the CPU's speed only; the relay also pays for system calls and "
             "wake-ups (the next row)"),
        _row("machine_wakeup_us", round((wakeups_before + wakeups_after) / 2, 2), "µs",
             "a loopback echo round trip (two socket writes, two reads, two wake-ups) on "
             f"evacore's CPU, before and after: {wakeups_before:.2f} and {wakeups_after:.2f} "
             "µs; a relayed token pays for this kind of work"),
    ]
    return rows


def _litellm_note() -> str:
    if importlib.util.find_spec("litellm") is None and shutil.which("litellm") is None:
        return "LiteLLM proxy not installed: the third target is skipped"
    return "LiteLLM proxy installed, but this benchmark does not drive it: skipped"


def explain(rows: list[dict[str, Any]]) -> str:
    """What limits the missed targets, with this run's own figures."""
    from _relay_limits import explain as limits

    return limits(rows)


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['metric']:>30}: {row['value']!s:>10} {row['unit']:<9} {row['note']}")
