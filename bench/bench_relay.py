"""Benchmark the streaming relay: a fast fake OpenAI upstream streamed directly, through
evacore's generate (`POST /v1/chats/{id}/generate`), through its OpenAI-compatible facade
(`POST /v1/chat/completions`) and, when it is installed, through the LiteLLM proxy, side by
side in one run, each scenario repeated; an openai-chat connection, no rules armed.

Must not: reach past loopback or leave a child process behind. evacore (and the LiteLLM
proxy) run pinned to one CPU, the load client and the fake upstream to the other.
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs
from _relay_memory import Growth, extra_stream
from _relay_own import Turns, own_per_token
from _relay_setup import (
    PROMPT,
    TOKEN,
    WARM_TOURS,
    Setup,
    facade_body,
    facade_plan,
    generate_plan,
    model_name,
    plan,
    port_of,
    raw_request,
)
from bench_cold import _Target
from runner import combine

CPU_US_PER_TOKEN = 40.0
FIXED_MS_PER_TOUR = 4.0
THROUGHPUT_RATIO = 0.90
LITELLM_SHARE = 0.05
"""A paced token's own CPU at most this share of the LiteLLM proxy's, same run."""
ADDED_TTFT_MS = {"s1": 3.0, "s2": 5.0}
FLOOR_SCENARIOS = ("paced", "paced_long", "paced5", "s2")
"""Scenarios also run through the bare relay (`_relay_floor.py`): the floor of a paced token."""
PARSING_FLOOR_SCENARIOS = ("paced", "paced_long", "s2")
"""Scenarios also run through the bare relay's parsing mode (the least a relay keeping the
stream contract does: each event parsed, each text written on as a `delta` event)."""
FAST_LANE_SCENARIOS = ("paced", "paced5", "s2")
"""Scenarios whose tours say how many deltas took the fast lane (`<scenario>_fast_lane_share`)."""
IDLE_RSS_MB = 150.0
IDLE_SECONDS = 4.0
PER_STREAM_KB = 100.0
LITELLM_KEY = "sk-bench-litellm-master"
REPEATS = 1
"""The runner runs this module once: it repeats every scenario itself (RUNS), with the
servers kept up, and returns medians with their spread."""
RUNS, QUICK_RUNS = 3, 1
OWN_ROUNDS, QUICK_OWN_ROUNDS = 11, 2
"""Pairs of paced requests (the paced and the paced_long stream, one after the other) per
relay for a paced token's own CPU (`_relay_own.py`)."""
MEMORY_RUNS, QUICK_MEMORY_RUNS = 3, 1
"""Fresh servers taken through S2 and S3 for the memory an extra stream takes
(`_relay_memory.py`); their median is the figure."""


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
        Scenario("paced", 1, 200, 2, count=6), Scenario("paced_long", 1, 400, 2, count=2),
        Scenario("paced5", 1, 200, 5, count=4), Scenario("tour1", 1, 1, 0, count=20),
        Scenario("s2", 64, 100, 5, seconds=10), Scenario("s3", 256, 100, 5, seconds=12))
QUICK = (Scenario("s1", 1, 200, 0, count=3), Scenario("long", 1, 1000, 0, count=1),
         Scenario("paced", 1, 50, 2, count=1), Scenario("paced_long", 1, 100, 2, count=1),
         Scenario("paced5", 1, 50, 5, count=1), Scenario("tour1", 1, 1, 0, count=3),
         Scenario("s2", 2, 100, 5, seconds=0.5), Scenario("s3", 6, 100, 5, seconds=0.5))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float], q: float) -> float:
    return round(_pct(values, q) * 1000, 3)


def _relayed(load_prefix: list[str], proc: procs.Child, plan: dict[str, Any],
             timeout: float) -> dict[str, Any]:
    """One scenario through a relay (evacore or the LiteLLM proxy), with its CPU time in
    nanoseconds: over the load client's run (`window_*`, with the wall time and the core's
    load of that same window) and until the process is quiet again (`cpu_seconds`, which adds
    the saving of streams cut at the end)."""
    procs.settle(proc.pid, window=0.25)
    core = procs.server_cpu()
    busy0 = procs.core_times(core)
    mark = procs.CpuMark(proc.pid)
    started = time.perf_counter()
    with procs.RssPeak(proc.pid) as rss:
        relayed = procs.load(load_prefix, plan, timeout)
        wall = time.perf_counter() - started
        window_ns, window_runs = mark.since()
        busy1 = procs.core_times(core)
        procs.settle(proc.pid, window=0.25)  # streams cut at the end are still being saved
    relayed["cpu_seconds"] = mark.since()[0] / 1e9
    relayed["window_cpu"] = window_ns / 1e9
    relayed["window_runs"] = window_runs
    relayed["window_wall"] = wall
    relayed["core_busy"] = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    relayed["rss_peak"] = rss.peak
    if relayed["errors"]:
        relayed["error_samples"] += proc.error_lines()
    return relayed


@dataclass
class Relays:
    """What the scenarios run against: evacore and, when installed, the LiteLLM proxy."""

    server: procs.Child
    server_url: str
    litellm: procs.Child | None = None
    litellm_url: str | None = None
    floors: dict[str, tuple[procs.Child, str]] | None = None
    """upstream base URL -> the bare relay in front of it."""
    parsing_floors: dict[str, tuple[procs.Child, str]] | None = None
    """upstream base URL -> the bare relay's parsing mode in front of it."""


def _measure(load_prefix: list[str], relays: Relays, scenario: Scenario, upstream_url: str,
             chat_ids: list[str], facade_chats: list[str]) -> dict[str, Any]:
    """The scenario against the upstream directly, then through generate, the facade and the
    LiteLLM proxy, one after the other."""
    timeout = (scenario.seconds or 0) + (scenario.count or 0) * 10 + 180
    model = model_name(scenario.tokens, scenario.delay_ms)
    direct_body = {"model": "bench-model", "stream": True,
                   "stream_options": {"include_usage": True},
                   "messages": [{"role": "user", "content": PROMPT}]}
    up_port = port_of(upstream_url)
    direct = procs.load(load_prefix, plan(
        up_port, [raw_request("/v1/chat/completions", up_port, direct_body)],
        '"content"', scenario, None), timeout)
    port = port_of(relays.server_url)
    relayed = _relayed(load_prefix, relays.server, generate_plan(port, chat_ids, scenario),
                       timeout)
    facade = _relayed(load_prefix, relays.server,
                      facade_plan(port, facade_chats, "@" + model, scenario), timeout)
    out = {"direct": direct, "evacore": relayed, "facade": facade}
    if relays.floors and upstream_url in relays.floors and scenario.name in FLOOR_SCENARIOS:
        child, url = relays.floors[upstream_url]
        fport = port_of(url)
        out["floor"] = _relayed(load_prefix, child, plan(
            fport, [raw_request("/v1/chat/completions", fport, direct_body)], '"content"',
            scenario, None), timeout)
    parsing = relays.parsing_floors or {}
    if upstream_url in parsing and scenario.name in PARSING_FLOOR_SCENARIOS:
        child, url = parsing[upstream_url]
        pport = port_of(url)
        out["parsing_floor"] = _relayed(load_prefix, child, plan(
            pport, [raw_request("/v1/chat/completions", pport, direct_body)], "event: delta",
            scenario, None), timeout)
    if relays.litellm is not None and relays.litellm_url:
        lport = port_of(relays.litellm_url)
        body = {**direct_body, "model": model}
        out["litellm"] = _relayed(load_prefix, relays.litellm, plan(
            lport, [raw_request("/v1/chat/completions", lport, body, LITELLM_KEY)],
            '"content":"', scenario, 'data: {"error"'), timeout)
    return out


def _row(metric: str, value: float | None, unit: str, note: str,
         target: str | None = None, met: bool | None = None) -> dict[str, Any]:
    return {"bench": "relay", "metric": metric, "value": value, "unit": unit,
            "target": target, "met": met, "note": note}


def _rate(r: dict[str, Any]) -> float:
    return r["completed"] / r["elapsed"] if r["elapsed"] else 0.0


def _cpu_per_tour_ms(scenario: Scenario, e: dict[str, Any]) -> float:
    return e["cpu_seconds"] * 1000 / e["completed"] if e["completed"] else float("nan")


ROUTES = {"evacore": ("", "generate"), "facade": ("facade_", "the facade"),
          "litellm": ("litellm_", "the LiteLLM proxy")}
"""route -> (metric prefix of its target rows, its name in notes)."""


def _scenario_rows(scenario: Scenario, result: dict[str, Any]) -> list[dict[str, Any]]:
    s, d = scenario.name, result["direct"]
    note = scenario.describe()
    rows: list[dict[str, Any]] = []
    for who in ("direct", *[w for w in ROUTES if w in result]):
        r = result[who]
        if s != "long":
            rows.append(_row(f"{s}_{who}_streams_per_s", round(_rate(r), 2), "streams/s",
                             f"{note}; {r['completed']} streams in {r['elapsed']:.1f} s"))
        rows += [_row(f"{s}_{who}_ttft_p50_ms", _ms(r["ttft"], 0.5), "ms", note),
                 _row(f"{s}_{who}_ttft_p99_ms", _ms(r["ttft"], 0.99), "ms", note)]
        if s in ("s1", "long"):
            rows += [_row(f"{s}_{who}_total_p50_ms", _ms(r["total"], 0.5), "ms", note),
                     _row(f"{s}_{who}_total_p99_ms", _ms(r["total"], 0.99), "ms", note)]
        if s in ("s2", "s3") and r.get("tail"):
            rows.append(_row(f"{s}_{who}_tail_p50_ms", _ms(r["tail"], 0.5), "ms",
                             f"{note}; from a stream's last token to its end (what comes "
                             "after the answer's text: through evacore its save, the "
                             "`message` and `done` events)"))
        if r["unfinished"] or s in ("s2", "s3"):
            rows.append(_row(f"{s}_{who}_unfinished", r["unfinished"], "streams",
                             "still streaming when the client stopped waiting "
                             f"({r['elapsed']:.0f} s after the start); not counted as errors"))
        must_be_clean = s == "s3" and who in ("evacore", "facade")
        rows.append(_row(f"{s}_{who}_errors", r["errors"], "errors",
                         "; ".join(r["error_samples"]) or note,
                         "= 0" if must_be_clean else None,
                         r["errors"] == 0 if must_be_clean else None))
    for who, (prefix, label) in ROUTES.items():
        if who in result:
            rows += _target_rows(scenario, d, result[who], prefix, label, judged=who != "litellm")
    if "litellm" in result:
        rows += _litellm_ratios(scenario, result)
    if "floor" in result:
        rows += _floor_rows(scenario, result)
    return rows


def _floor_rows(scenario: Scenario, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The bare relay's CPU per token, and evacore's own cost above it, same run."""
    s, floor = scenario.name, _per_token_us(result["floor"])
    rows = [_row(f"{s}_floor_cpu_us_per_token", round(floor, 1), "µs",
                 "a bare Python relay (raw asyncio protocols on uvloop, one read and one "
                 "write per upstream chunk, no parsing, no storage) on the same pinned core: "
                 "what the interpreter, the event loop and the kernel charge per relayed "
                 f"token here; {result['floor']['tokens']} tokens, "
                 f"{result['floor']['errors']} errors")]
    if s in ("s2", "s3") and _rate(result["direct"]):
        rows.append(_row(f"{s}_floor_throughput_vs_direct",
                         round(_rate(result["floor"]) / _rate(result["direct"]), 3), "x",
                         "the bare relay's streams/s over direct streams/s: the most any "
                         "Python relay on this core could reach here"))
    if s.startswith("paced") and result["floor"]["tokens"]:
        rows.append(_row(f"{s}_floor_wakeups_per_token",
                         round(result["floor"]["window_runs"] / result["floor"]["tokens"], 2),
                         "x", "times the bare relay's threads were put on a CPU (schedstat) "
                         "over the tokens relayed: 1 is one wake-up per token"))
    for who, label in (("evacore", "generate"), ("facade", "the facade")):
        mine = _per_token_us(result[who])
        rows.append(_row(f"{s}_{'' if who == 'evacore' else 'facade_'}cpu_us_per_token_over_floor",
                         round(mine - floor, 1), "µs",
                         f"{label}'s CPU per token minus the bare relay's: evacore's own "
                         "code per token, plus its per-tour cost spread over the tokens"))
    if "parsing_floor" in result:
        parsed = _per_token_us(result["parsing_floor"])
        rows.append(_row(f"{s}_parsing_floor_cpu_us_per_token", round(parsed, 1), "µs",
                         "the bare relay's parsing mode (each event's JSON parsed, each text "
                         "written on as evacore's `delta` event; no tour, no storage) on the "
                         "same pinned core: the least a relay keeping evacore's stream contract "
                         f"spends per token under this load; {result['parsing_floor']['tokens']}"
                         f" tokens, {result['parsing_floor']['errors']} errors"))
        for who, label in (("evacore", "generate"), ("facade", "the facade")):
            mine = _per_token_us(result[who])
            rows.append(_row(
                f"{s}_{'' if who == 'evacore' else 'facade_'}cpu_us_per_token_over_parsing_floor",
                round(mine - parsed, 1), "µs",
                f"{label}'s CPU per token minus the parsing relay's: what evacore adds to the "
                "least the stream contract takes, mostly its tours' own cost (the user "
                "message's commit, the prompt's assembly, the save) spread over the tokens"))
    return rows


def _own_us(results: dict[str, Any], who: str) -> float:
    """A paced token's own CPU through `who` (a route, `floor` or `parsing_floor`) in µs,
    measured by `_own_tokens`; nan when it was not."""
    return float(results.get("own", {}).get(who, math.nan))


def _own_tokens(relays: Relays, setup: Setup, scenarios: dict[str, Scenario],
                ups: dict[tuple[int, float], tuple[Any, str]],
                connections: dict[tuple[int, float], str], rounds: int) -> dict[str, float]:
    """A paced token's own CPU through generate, the facade, the bare relay, its parsing
    mode and the LiteLLM proxy: the paced and paced_long streams one request at a time, in
    turn (`_relay_own.py`)."""
    short, long_ = scenarios.get("paced"), scenarios.get("paced_long")
    if short is None or long_ is None:
        return {}
    keys = [(sc.tokens, sc.delay_ms) for sc in (short, long_)]
    clients: list[httpx.Client] = []

    def client(headers: dict[str, str] | None = None) -> httpx.Client:
        clients.append(httpx.Client(timeout=120, headers=headers or {}))
        return clients[-1]

    auth = {"Authorization": f"Bearer {TOKEN}"}
    url, pid = relays.server_url, relays.server.pid
    upstream_body = {"model": "bench-model", "stream": True,
                     "messages": [{"role": "user", "content": PROMPT}]}
    pairs: dict[str, list[Any]] = {name: [] for name in ("evacore", "facade")}
    for key in keys:
        chat, facade_chat = setup.chats(connections[key], 2)
        pairs["evacore"].append(_Target(
            client(auth), pid, f"{url}/v1/chats/{chat}/generate",
            {"message": {"content": PROMPT}, "stream": True}))
        model = "@" + model_name(*key)
        pairs["facade"].append(Turns(
            client({**auth, "X-Evacore-Chat": facade_chat}), pid, f"{url}/v1/chat/completions",
            lambda turn, model=model: facade_body(model, turn)))
    for who, found in (("floor", relays.floors or {}),
                       ("parsing_floor", relays.parsing_floors or {})):
        if all(ups[key][1] in found for key in keys):
            pairs[who] = [_Target(client(), found[ups[key][1]][0].pid,
                                  f"{found[ups[key][1]][1]}/v1/chat/completions", upstream_body)
                          for key in keys]
    if relays.litellm is not None and relays.litellm_url:
        lite = client({"Authorization": f"Bearer {LITELLM_KEY}"})
        pairs["litellm"] = [_Target(lite, relays.litellm.pid,
                                    f"{relays.litellm_url}/v1/chat/completions",
                                    {**upstream_body, "model": model_name(*key)})
                            for key in keys]
    try:
        return own_per_token({who: (a, b) for who, (a, b) in pairs.items()},
                             long_.tokens - short.tokens, rounds)
    finally:
        for c in clients:
            c.close()


def _own_token_rows(results: dict[str, Any], scenarios: dict[str, Scenario], target: str,
                    prefix: str) -> list[dict[str, Any]]:
    """A paced token's own CPU through one route (no part of its tour in it: the same tour
    with twice the tokens less the tour), judged for evacore's routes against the per-token
    target and against the LiteLLM proxy's own in the same run; beside it, for generate, the
    bare relay's and its parsing mode's, measured the same way."""
    own = _own_us(results, target)
    if not math.isfinite(own):
        return []
    short, long_ = scenarios["paced"], scenarios["paced_long"]
    judge = target != "litellm"
    how = (f"the median over pairs of requests made one after the other of (CPU of a "
           f"{long_.tokens}-token tour - CPU of a {short.tokens}-token tour) / "
           f"{long_.tokens - short.tokens}, tokens {short.delay_ms:g} ms apart, each its own "
           "upstream write: a token that arrives alone, read, relayed and written by itself, "
           "with no part of its tour in it")
    rows = [_row(f"{prefix}cpu_us_per_paced_token_own", round(own, 1), "µs", how,
                 f"<= {CPU_US_PER_TOKEN:g} µs" if judge else None,
                 own <= CPU_US_PER_TOKEN if judge else None)]
    lite = _own_us(results, "litellm")
    if judge and math.isfinite(lite) and lite > 0:
        share = own / lite
        rows.append(_row(f"{prefix}paced_token_own_over_litellm", round(share, 3), "x",
                         f"the row above over the LiteLLM proxy's own paced token "
                         f"({lite:.1f} µs, measured the same way in the same run)",
                         f"<= {LITELLM_SHARE:g}", share <= LITELLM_SHARE))
    if target == "evacore":
        bare = "the bare relay (one read and one write a token, nothing parsed)"
        parsing = ("the bare relay's parsing mode (the least a relay keeping evacore's "
                   "stream contract does)")
        for who, name, what in (("floor", "paced_floor", bare),
                                ("parsing_floor", "paced_parsing_floor", parsing)):
            theirs = _own_us(results, who)
            if math.isfinite(theirs):
                rows.append(_row(f"{name}_cpu_us_per_token_own", round(theirs, 1), "µs",
                                 f"the same for {what}, same streams, same run"))
                if who == "parsing_floor" and theirs > 0:
                    rows.append(_row("paced_token_own_over_parsing_floor",
                                     round(own / theirs, 2), "x",
                                     "generate's own paced token over the parsing relay's"))
    return rows


def _per_token_us(e: dict[str, Any]) -> float:
    return e["cpu_seconds"] * 1e6 / e["tokens"] if e["tokens"] else float("nan")


def _litellm_ratios(scenario: Scenario, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The LiteLLM proxy against evacore's two routes, measured side by side in this run."""
    s, lite = scenario.name, _per_token_us(result["litellm"])
    rows = []
    for who, label in (("facade", "the facade"), ("evacore", "generate")):
        mine = _per_token_us(result[who])
        ratio = lite / mine if mine and math.isfinite(mine) else float("nan")
        rows.append(_row(f"{s}_litellm_over_{who}_cpu_per_token", round(ratio, 2), "x",
                         f"LiteLLM proxy's CPU per token over {label}'s, same scenario, same "
                         "run, same pinned core"))
    if s in ("s2", "s3"):
        f = _rate(result["facade"])
        ratio = _rate(result["litellm"]) / f if f else float("nan")
        rows.append(_row(f"{s}_litellm_over_facade_streams_per_s", round(ratio, 3), "x",
                         "LiteLLM proxy's streams/s over the facade's"))
    return rows


def _target_rows(scenario: Scenario, d: dict[str, Any], e: dict[str, Any], prefix: str,
                 label: str, judged: bool = True) -> list[dict[str, Any]]:
    """Added TTFT, throughput, CPU per token, per tour and CPU share of one route (generate:
    no prefix, the names the earlier results use; the facade: `facade_`; the LiteLLM proxy:
    `litellm_`, never judged against evacore's targets)."""
    s = scenario.name
    rows: list[dict[str, Any]] = []
    who = "the LiteLLM proxy" if prefix == "litellm_" else "evacore"
    if s != "long":
        added = (statistics.median(e["ttft"]) - statistics.median(d["ttft"])) * 1000 \
            if e["ttft"] and d["ttft"] else float("nan")
        limit = ADDED_TTFT_MS.get(s)
        judge = judged and limit is not None
        rows.append(_row(f"{s}_{prefix}added_ttft_p50_ms", round(added, 3), "ms",
                         f"{label} TTFT p50 minus direct TTFT p50"
                         + ("; includes the user-message commit and prompt assembly"
                            if prefix != "litellm_" else "")
                         + (" and the chat lookup" if prefix == "facade_" else ""),
                         f"<= {limit:g} ms" if judge else None,
                         added <= limit if judge and limit is not None else None))
    if s in ("s2", "s3"):
        ratio = _rate(e) / _rate(d) if _rate(d) else float("nan")
        judge = judged and s == "s2"
        rows.append(_row(f"{s}_{prefix}throughput_vs_direct", round(ratio, 3), "x",
                         f"{label} streams/s over direct streams/s",
                         f">= {THROUGHPUT_RATIO:g}" if judge else None,
                         ratio >= THROUGHPUT_RATIO if judge else None))
    tokens = e["tokens"]
    per_token = _per_token_us(e)
    judge = judged and s in ("s2", "s3")  # tokens that arrive paced, as models send them
    if s != "tour1":  # a one-token tour is all fixed cost: no per-token figure
        rows.append(_row(
            f"{s}_{prefix}cpu_us_per_token", round(per_token, 1), "µs",
            f"{who}'s CPU (scheduler ns, all threads) {e['cpu_seconds']:.3f} s / {tokens} "
            f"tokens relayed ({label})"
            + ("; long answers: the per-tour cost is spread thin" if s == "long" else
               "; one token per upstream read: no burst to batch"
               if s.startswith("paced") else ""),
            f"<= {CPU_US_PER_TOKEN:g} µs" if judge else None,
            per_token <= CPU_US_PER_TOKEN if judge else None))
    if scenario.count:  # every request ran to its end: the CPU divides cleanly
        rows.append(_row(f"{s}_{prefix}cpu_ms_per_tour", round(_cpu_per_tour_ms(scenario, e), 2),
                         "ms", f"{who}'s CPU per request through {label}, {scenario.tokens} "
                         "tokens"))
    share = e["window_cpu"] / e["window_wall"] * 100 if e["window_wall"] else float("nan")
    rows.append(_row(f"{s}_{prefix or 'evacore_'}cpu_share", round(share, 1), "% of a core",
                     f"{who}'s CPU over the wall time of one window (the load client's run, "
                     f"{e['window_wall']:.2f} s); its core was busy {e['core_busy'] * 100:.0f}% "
                     "of that window, counting all work on it"))
    return rows


def _split_rows(results: dict[str, Any], scenarios: dict[str, Scenario], target: str = "evacore",
                prefix: str = "") -> list[dict[str, Any]]:
    """Per-token CPU from two answer lengths (S1 and long, one stream each); the fixed cost
    of a tour measured on one-token answers (`tour1`), each a tour of its own."""
    short, long_, one = scenarios["s1"], scenarios["long"], scenarios["tour1"]
    a = _cpu_per_tour_ms(short, results["s1"][target])
    b = _cpu_per_tour_ms(long_, results["long"][target])
    marginal = (b - a) * 1000 / (long_.tokens - short.tokens)
    fixed = _cpu_per_tour_ms(one, results["tour1"][target]) - marginal * one.tokens / 1000
    paced = []
    for name in ("paced", "paced5"):
        if name not in results or not scenarios[name].count:
            continue
        sc = scenarios[name]
        per = (_cpu_per_tour_ms(sc, results[name][target]) - fixed) * 1000 / sc.tokens
        runs = (results[name][target]["window_runs"] / sc.count
                - results["tour1"][target]["window_runs"] / one.count) / sc.tokens
        paced.append(_row(
            f"{prefix}wakeups_per_{name}_token", round(runs, 2), "x",
            f"(times put on a CPU per {name} tour - per one-token tour) / {sc.tokens}, all "
            "threads (schedstat): 1 is one wake-up per token"))
        paced.append(_row(
            f"{prefix}cpu_us_per_{name}_token", round(per, 1), "µs",
            f"(CPU per {name} tour - cpu_ms_per_tour_fixed) / {sc.tokens}: a token that "
            f"arrives alone ({sc.delay_ms:g} ms apart"
            + (", as in S2 and S3" if sc.delay_ms == 5 else "")
            + ") is read, relayed and written by itself, with the part of its tour that "
            "costs more than back to back (the stages and the save run between paced "
            "tokens, on a core the pauses left cold)"))
    return [
        *paced,
        *_own_token_rows(results, scenarios, target, prefix),
        _row(f"{prefix}cpu_us_per_extra_token", round(marginal, 1), "µs",
             f"(CPU per {long_.tokens}-token tour - CPU per {short.tokens}-token tour) / "
             f"{long_.tokens - short.tokens}: the relay's own cost per token"),
        _row(f"{prefix}cpu_ms_per_tour_fixed", round(fixed, 2), "ms",
             f"CPU per one-token tour ({one.count} in a row on one chat, `tour1`) minus that "
             "token's cost: everything a tour costs besides relaying tokens",
             f"<= {FIXED_MS_PER_TOUR:g} ms" if target != "litellm" else None,
             fixed <= FIXED_MS_PER_TOUR if target != "litellm" else None),
    ]


def _tour_record_rows(scenario: Scenario, records: dict[str, Any],
                      route: str = "generate") -> list[dict[str, Any]]:
    """The fast lane's share of the scenario's tokens and, under load, where a tour's wait
    for its first token goes, from the tours' own diagnostics (`route`: generate's chats or
    the facade's, whose rows are named `<scenario>_facade_…`)."""
    s = scenario.name + ("_facade" if route == "facade" else "")
    fast, tokens = records["fast"], records["tokens"]
    rows = [_row(f"{s}_fast_lane_share", round(fast / tokens, 3) if tokens else None, "x",
                 f"deltas written from the upstream read itself (the fast lane) over the "
                 f"tokens answered through {route}: {fast} of {tokens}")]
    first, stages, waited = records["first_token_ms"], records["stages_ms"], records["waited_ms"]
    if scenario.name == "s2" and first:
        rows += [
            _row(f"{s}_tour_first_token_ms_p50", round(statistics.median(first), 2), "ms",
                 f"{route}'s tours: from a tour's start (its request handed to the core) to "
                 "its first delta, as the tour records it (`first_token_ms`); p50 over the "
                 f"newest answers of every stream ({len(first)} tours)"),
            _row(f"{s}_tour_waited_ms_p50", round(statistics.median(waited), 2), "ms",
                 "the same tours: from a tour's start to its stage 1 (`waited_ms`: its task "
                 "waiting for a pass of the loop behind the work already ready, and for the "
                 "chat's earlier tour)"),
            _row(f"{s}_tour_turn_waits", records["turn_waits"], "tours",
                 f"of those {len(first)} tours, the ones that waited for their chat's earlier "
                 "tour to end (`turn_wait_ms` in their diagnostics); the rest of `waited_ms` is "
                 "the loop"),
            _row(f"{s}_tour_stages_ms_p50", round(statistics.median(stages), 2), "ms",
                 "the same tours: their stages' own time before the streaming stage (stages "
                 "1-11, the sum of their timings); the rest of `first_token_ms` is waiting "
                 "(the upstream's head waking the tour, passes of the loop)"),
        ]
    return rows


def _one_run(load_prefix: list[str], relays: Relays, setup: Setup,
             scenarios: tuple[Scenario, ...], ups: dict[tuple[int, float], tuple[Any, str]],
             connections: dict[tuple[int, float], str], *, own_rounds: int
             ) -> list[dict[str, Any]]:
    """Every scenario once, each on fresh chats (a chat's history grows with its turns),
    then a paced token's own CPU through each relay (`_own_tokens`)."""
    by_name = {sc.name: sc for sc in scenarios}
    results: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for sc in scenarios:
        key = (sc.tokens, sc.delay_ms)
        chats = setup.chats(connections[key], sc.concurrency)
        facade_chats = setup.chats(connections[key], sc.concurrency)
        results[sc.name] = _measure(load_prefix, relays, sc, ups[key][1], chats, facade_chats)
        rows += _scenario_rows(sc, results[sc.name])
        if sc.name in FAST_LANE_SCENARIOS:
            rows += _tour_record_rows(sc, setup.tour_records(chats))
            rows += _tour_record_rows(sc, setup.tour_records(facade_chats), "facade")
    results["own"] = _own_tokens(relays, setup, by_name, ups, connections, own_rounds)
    for who, (prefix, _) in ROUTES.items():
        if who in results["s1"]:
            rows += _split_rows(results, by_name, who, prefix)
    return rows


def _memory_row(growths: list[Growth], s2: Scenario, s3: Scenario) -> dict[str, Any]:
    """The memory an extra stream takes: the median over fresh servers (`_relay_memory.py`)."""
    kbs = sorted(g.kb for g in growths)
    kb = statistics.median(kbs)
    mb = 1024 * 1024
    peaks = ", ".join(f"{g.peak2 / mb:.1f} and {g.peak3 / mb:.1f}" for g in growths)
    errors = sum(g.errors for g in growths)
    return {**_row("rss_per_extra_stream_kb", round(kb, 1), "KB",
                   f"(peak RSS in S3 through generate - the higher peak RSS in S2, through "
                   f"generate or the facade) / {s3.concurrency - s2.concurrency} extra streams, "
                   f"each measurement on an evacore started for it alone (a process's second "
                   f"S3 reuses what its first took); the median of {len(growths)} "
                   f"({', '.join(f'{v:.1f}' for v in kbs)} KB); peaks {peaks} MB"
                   + (f"; {errors} streams failed" if errors else ""),
                   f"<= {PER_STREAM_KB:g} KB", kb <= PER_STREAM_KB and not errors),
            "spread": [kbs[0], kbs[-1]], "runs": len(growths)}


def run(quick: bool = False) -> list[dict[str, Any]]:
    """S1-S3 (and long answers) direct, through evacore's two routes and through the LiteLLM
    proxy when installed, RUNS times; CPU, TTFT, throughput, RSS as medians with spread."""
    scenarios = QUICK if quick else FULL
    runs = QUICK_RUNS if quick else RUNS
    server_prefix, load_prefix, pin_note = procs.pinning()
    program = procs.litellm_program()
    per_run: list[list[dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="evacore-bench-relay-") as tmp:
        folder = Path(tmp)
        ups: dict[tuple[int, float], tuple[procs.Child, str]] = {}
        relays: Relays | None = None
        children: list[procs.Child] = []
        try:
            for sc in scenarios:
                if (sc.tokens, sc.delay_ms) not in ups:
                    ups[(sc.tokens, sc.delay_ms)] = procs.upstream(
                        load_prefix, folder, sc.tokens, sc.delay_ms)
            server, url = procs.server(server_prefix, folder, TOKEN)
            children.append(server)
            relays = Relays(server, url, floors={}, parsing_floors={})
            for sc in scenarios:
                base = ups[(sc.tokens, sc.delay_ms)][1]
                if sc.name in FLOOR_SCENARIOS and base not in relays.floors:
                    relays.floors[base] = procs.floor(server_prefix, folder, base)
                    children.append(relays.floors[base][0])
                if sc.name in PARSING_FLOOR_SCENARIOS and base not in relays.parsing_floors:
                    relays.parsing_floors[base] = procs.floor(server_prefix, folder, base,
                                                              parse=True)
                    children.append(relays.parsing_floors[base][0])
            if program is not None:
                models = {model_name(*key): base for key, (_, base) in ups.items()}
                relays.litellm, relays.litellm_url = procs.litellm(
                    server_prefix, folder, program, models, LITELLM_KEY)
                children.append(relays.litellm)
                _warm_litellm(relays.litellm_url, model_name(scenarios[0].tokens, 0))
            rss_start = procs.rss_bytes(server.pid)
            setup = Setup(url)
            connections = {key: setup.connection(base, *key) for key, (_, base) in ups.items()}
            s1 = scenarios[0]
            setup.warm(setup.chats(connections[(s1.tokens, 0)], 1)[0])
            setup.warm_facade(setup.chats(connections[(s1.tokens, 0)], 1)[0],
                              "@" + model_name(s1.tokens, 0))
            rss_idle = procs.rss_bytes(server.pid)
            idle = _idle(server.pid)
            speed_before = procs.calibrate()
            wakeups_before = procs.calibrate_wakeups()
            ticks0, whole_run = procs.cpu_seconds(server.pid), procs.CpuMark(server.pid)
            for i in range(runs):
                per_run.append(_one_run(load_prefix, relays, setup, scenarios, ups, connections,
                                        own_rounds=QUICK_OWN_ROUNDS if quick else OWN_ROUNDS))
            ticks = procs.cpu_seconds(server.pid) - ticks0
            nanos = whole_run.since()[0] / 1e9
            setup.http.close()
            s2, s3 = (next(sc for sc in scenarios if sc.name == name) for name in ("s2", "s3"))
            growths = [extra_stream(server_prefix, load_prefix, ups[(s2.tokens, s2.delay_ms)][1],
                                    s2, s3, _relayed)
                       for _ in range(QUICK_MEMORY_RUNS if quick else MEMORY_RUNS)]
        except Exception as exc:
            log = relays.server.tail() if relays is not None else ""
            if relays is not None and relays.litellm is not None:
                log += "\n--- litellm:\n" + relays.litellm.tail()
            raise RuntimeError(f"relay bench failed: {exc}\n{log}") from exc
        finally:
            for child in children:
                child.stop()
            for child, _ in ups.values():
                child.stop()
        speed_after = procs.calibrate()
        wakeups_after = procs.calibrate_wakeups()
    rows = combine(per_run)
    mb = 1024 * 1024
    rows += [
        _memory_row(growths, s2, s3),
        _row("rss_idle_mb", round(rss_idle / mb, 1), "MB",
             f"after start, setup and {WARM_TOURS} warm-up tours ({rss_start / mb:.1f} MB right "
             "after start)", f"<= {IDLE_RSS_MB:g} MB", rss_idle / mb <= IDLE_RSS_MB),
        _row("idle_cpu_ms_per_s", round(idle[0], 2), "ms",
             f"evacore's CPU per second of wall time with no request, over {IDLE_SECONDS:g} s "
             "starting 1 s after the warm-up tours (its tokens still trusted, so the auth "
             "epoch's poll runs too): its server loop and pollers"),
        _row("idle_wakeups_per_s", round(idle[1], 2), "x",
             "times evacore's threads woke from a sleep of their own per second in the same "
             "window (voluntary context switches, so a busy core's preemptions do not count): "
             "its pollers share one clock, so they wake together"),
        _row("litellm_proxy", None, "", _litellm_note(program)),
        _row("pinning", None, "", pin_note),
        _row("cpu_clock_check", round(ticks / nanos, 3) if nanos else None, "x",
             f"evacore's CPU over all {runs} run(s) from /proc/<pid>/stat clock ticks "
             f"({ticks:.2f} s, ended threads included) over the scheduler's nanoseconds of "
             f"its live threads ({nanos:.3f} s, the source of every CPU figure here): near 1 "
             "means no thread took its time away"),
        {**_row("machine_speed_us", round((speed_before + speed_after) / 2, 2), "µs",
                "a fixed pure-Python workload (json.dumps of a 40-key dict) on evacore's CPU, "
                "before and after the scenarios (the spread is those two). It follows the "
                "CPU's speed only; the relay also pays for system calls and wake-ups (the "
                "next row)"),
         "spread": [min(speed_before, speed_after), max(speed_before, speed_after)], "runs": 2},
        {**_row("machine_wakeup_us", round((wakeups_before + wakeups_after) / 2, 2), "µs",
                "a loopback echo round trip (two socket writes, two reads, two wake-ups) on "
                "evacore's CPU, before and after the scenarios; a relayed token pays for this "
                "kind of work"),
         "spread": [min(wakeups_before, wakeups_after), max(wakeups_before, wakeups_after)],
         "runs": 2},
    ]
    return rows


def _idle(pid: int) -> tuple[float, float]:
    """(ms of CPU, wake-ups) per second of a process left alone for IDLE_SECONDS."""
    time.sleep(1.0)  # the warm-up's last save and its first poll behind it
    mark, sleeps0 = procs.CpuMark(pid), procs.sleeps(pid)
    time.sleep(IDLE_SECONDS)
    cpu, sleeps1 = mark.since()[0], procs.sleeps(pid)
    return cpu / 1e6 / IDLE_SECONDS, (sleeps1 - sleeps0) / IDLE_SECONDS


def _warm_litellm(url: str, model: str, tours: int = WARM_TOURS) -> None:
    with httpx.Client(base_url=url, timeout=60,
                      headers={"Authorization": f"Bearer {LITELLM_KEY}"}) as http:
        for _ in range(tours):
            r = http.post("/v1/chat/completions", json={
                "model": model, "stream": True,
                "messages": [{"role": "user", "content": PROMPT}]})
            r.raise_for_status()


def _litellm_note(program: Path | None) -> str:
    if program is None:
        return ("LiteLLM proxy not installed: no side-by-side figures in this run. Install it "
                f"apart from evacore with `{procs.LITELLM_INSTALL}` and run again")
    return (f"LiteLLM proxy {procs.litellm_version(program)} ({program}), measured side by "
            "side: `<scenario>_litellm_*` rows, same fake upstream, same pinned core, one "
            "process, no database; its repeated-chunk guard set past the answers' length "
            "(the fake repeats one token text)")


def explain(rows: list[dict[str, Any]]) -> str:
    """What limits the missed targets, with this run's own figures."""
    from _relay_limits import explain as limits

    return limits(rows)


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['metric']:>30}: {row['value']!s:>10} {row['unit']:<9} {row['note']}")
