"""What limits the relay benchmark's missed targets: this run's figures, set against what
profiling (pyinstrument and cProfile in-process, per-stage timings, SQL statement counts)
found.

Must not: measure; it reads the rows bench_relay produced. The profile findings are dated
(PROFILED) and name the code they point at, so a fix elsewhere shows up as a stale line.
"""

from __future__ import annotations

import math
from typing import Any

PROFILED = "as profiled on 2026-11-30 (pyinstrument in-process, stage timings, SQL counts)"


def _value(rows: list[dict[str, Any]], metric: str) -> float:
    for row in rows:
        if row["metric"] == metric and isinstance(row.get("value"), int | float):
            return float(row["value"])
    return math.nan


def _missed(rows: list[dict[str, Any]], *names: str) -> bool:
    return any(r.get("met") is False and r["metric"] in names for r in rows)


def _per_tour(rows: list[dict[str, Any]]) -> list[str]:
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    marginal = _value(rows, "cpu_us_per_extra_token")
    return [
        ("**A tour's own cost.** Besides relaying tokens a tour costs about "
         f"{fixed:.1f} ms of CPU here (`cpu_ms_per_tour_fixed`); a token that arrives in a "
         f"burst adds about {marginal:.0f} µs (`cpu_us_per_extra_token`). Where the fixed "
         f"part goes, {PROFILED}: 12 SQL statements (stage 1: the chat with its connection, "
         "character and persona in one query, the user's message and the tour row; stage 2: "
         "the history with active variants in one query; stage 14: the chat row, the "
         "answer's message and variant in one flush, the retrieval index, the tour row), "
         "each about 0.1-0.2 ms of CPU through SQLAlchemy and one trip to aiosqlite's "
         "thread; the JSON of the tour's diagnostics (orjson); the upstream request through "
         "httpx; FastAPI's request handling. Settings, linked lorebooks, memory blocks and "
         "document presence come from `evacore/store/recall.py` (2 s, forgotten on write) "
         "instead of four more queries."),
    ]


def _per_token(rows: list[dict[str, Any]]) -> list[str]:
    marginal = _value(rows, "cpu_us_per_extra_token")
    paced = _value(rows, "cpu_us_per_paced_token")
    return [
        (f"**A token that arrives alone costs about {paced:.0f} µs; in a burst, "
         f"{marginal:.0f} µs.** S2 and S3 send a token every 5 ms, so every token is its "
         "own trip: the upstream socket wakes the loop, httpx → httpcore → anyio → h11 read "
         "one chunk (about 40 µs of it: the same read through a bare asyncio stream costs "
         "about 10 µs on this machine), then the SSE decoder, the JSON parse, four async "
         "generator layers of the provider, the tour's event queue waking the response "
         "task, `sse_frame`, Starlette's `StreamingResponse` and one socket write in "
         "uvicorn. In a burst (S1, `long`) one read carries many tokens and "
         "`generate._stream` writes everything queued in one chunk, which is why a burst "
         "token costs about a tenth of a paced one. Tried without a measurable change "
         "through the server: an asyncio-native network backend for httpcore (its "
         "`network_backend` hook; 12 µs less per chunk in isolation). Not done: a leaner "
         "HTTP/1.1 reader for streams, fewer task hops per token."),
    ]


def _load(rows: list[dict[str, Any]]) -> list[str]:
    paced = _value(rows, "cpu_us_per_paced_token")
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    per_tour = fixed + paced * 100 / 1000
    capacity = 1000 / per_tour if per_tour and math.isfinite(per_tour) else math.nan
    direct = _value(rows, "s2_direct_streams_per_s")
    share = _value(rows, "s2_evacore_cpu_share")
    return [
        (f"**Concurrency (S2, S3).** A 100-token S2 tour costs about {per_tour:.0f} ms of "
         f"CPU ({fixed:.1f} ms fixed + 100 tokens that each arrive alone), so one core "
         f"finishes at most about {capacity:.0f} tours a second against {direct:.0f} streams "
         f"a second served directly; evacore used {share:.0f}% of its core during S2. The "
         "rest of the offered streams wait in the event loop, which is the added TTFT. No "
         "stream fails: S3's 256 concurrent streams end with zero errors (SQLite writes are "
         "short transactions; no write happens per token). httpcore's pool walks every "
         "pooled connection (polling idle ones) each time a request starts or ends; "
         "`evacore/providers/_pools.py` spreads requests over 16 pools, which took S2 from "
         "about 42 to 46 streams a second in a side-by-side run."),
    ]


def _memory(rows: list[dict[str, Any]]) -> list[str]:
    return [
        ("**Memory per extra stream.** The figure is the difference of two peak RSS samples "
        "divided by the extra streams; with few streams (the quick variant) allocator "
        "growth of a few MB dominates it. Judge it on the full run (192 extra streams)."),
    ]


def _facade(rows: list[dict[str, Any]]) -> list[str]:
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    ffixed = _value(rows, "facade_cpu_ms_per_tour_fixed")
    extra = _value(rows, "cpu_us_per_extra_token")
    fextra = _value(rows, "facade_cpu_us_per_extra_token")
    s1, fs1 = _value(rows, "s1_cpu_us_per_token"), _value(rows, "s1_facade_cpu_us_per_token")
    return [
        (f"**The facade next to generate.** The same tours through `POST /v1/chat/completions` "
         f"cost {fs1:.0f} µs per S1 token against generate's {s1:.0f} µs: {ffixed:.1f} ms "
         f"fixed per tour against {fixed:.1f} ms, and {fextra:.0f} µs against {extra:.0f} µs "
         "per burst token. Per tour the facade adds the chat lookup before the tour (the "
         "model id, the binding's digest query) and the binding written after it, two short "
         "transactions; per token it writes an OpenAI chunk of about 200 bytes (from a "
         "byte template, one orjson call for the text) where generate writes a 35-byte "
         "`delta` event. The LiteLLM proxy, speaking this same protocol, measured "
         "595-806 µs per token on this machine."),
    ]


def explain(rows: list[dict[str, Any]]) -> str:
    """Markdown for the missed targets of this run; empty when every target was met."""
    parts: list[list[str]] = []
    cpu = ("s1_cpu_us_per_token", "s2_cpu_us_per_token", "s3_cpu_us_per_token")
    if _missed(rows, *cpu, "s1_added_ttft_p50_ms"):
        parts.append(_per_tour(rows))
    if _missed(rows, *cpu):
        parts.append(_per_token(rows))
    if _missed(rows, "s2_throughput_vs_direct", "s2_added_ttft_p50_ms", "s3_evacore_errors"):
        parts.append(_load(rows))
    if _missed(rows, "rss_per_extra_stream_kb"):
        parts.append(_memory(rows))
    if math.isfinite(_value(rows, "s1_facade_cpu_us_per_token")):
        parts.append(_facade(rows))
    if not parts:
        return ""
    speed = _value(rows, "machine_speed_us")
    wakeups = _value(rows, "machine_wakeup_us")
    parts.append([
        ("**This machine.** Two shared cores whose speed drifts with other work on the host. "
         "The same code measured 50 µs per S1 token with a 4.5 ms added TTFT at one time of "
         "2026-11-30 and 73 µs with 7.2 ms an hour later; interleaved runs of two commits "
         "agreed within a few percent each time. S1's two targets sit inside that drift. "
         f"`machine_speed_us` ({speed:.1f} µs here) times pure Python and "
         f"`machine_wakeup_us` ({wakeups:.1f} µs here) a loopback round trip, both on "
         "evacore's CPU in this run, to set other runs against. Ratios to the direct run "
         "travel better than absolute figures."),
    ])
    return "\n\n".join("\n".join(p) for p in parts)
