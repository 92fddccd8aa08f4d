"""What limits the relay benchmark's missed targets: this run's figures, set against what
profiling (py-spy on the server, per-stage timings, SQL statement counts) found.

Must not: measure; it reads the rows bench_relay produced. The profile findings are dated
(PROFILED) and name the code they point at, so a fix elsewhere shows up as a stale line.
"""

from __future__ import annotations

import math
from typing import Any

PROFILED = "as profiled on 2026-11-30 at commit 9799525 with py-spy --gil on 200- and 3,000-token tours"


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
    budget = 60 * 100 / 1000 - (marginal * 100 / 1000 if math.isfinite(marginal) else 0)
    need = (f"To meet 60 µs per token at 100 tokens a whole tour would have to cost under "
            f"{budget:.1f} ms of CPU here." if budget > 0 else
            f"The per-token part alone ({marginal:.0f} µs) is over 60 µs, and each tour's own "
            "cost comes on top.")
    return [
        ("**CPU per token is set by the cost of a tour, not of a token.** Besides relaying "
         f"its tokens a tour costs about {fixed:.0f} ms of CPU (`cpu_ms_per_tour_fixed`); "
         f"each relayed token adds about {marginal:.0f} µs (`cpu_us_per_extra_token`). Over "
         f"a 100-token answer the per-tour part alone is {fixed * 10:.0f} µs per token. "
         f"{need} Where a tour's CPU goes, {PROFILED}:"),
        "",
        ("1. Stage 2 (`macros`) reads the last 200 messages through "
        "`evacore/store/chats.py: history_newest_first`, which loads each active variant as "
        "a whole row, including `variants.meta`: the full diagnostics of the tour that made "
        "it, with the exact request body (28 KB at 40 messages, growing with the chat). "
        "Decoding that JSON was the largest single item (17% of server CPU at 40 messages); "
        "selecting only `id, content, steps` took a 200-token tour from 95 to 72 ms of CPU. "
        "The cost grows with the chat's length, so long chats pay it on every tour."),
        ("2. About 19 SQL statements per tour through the SQLAlchemy ORM and aiosqlite's "
        "worker thread, 1-2 ms of CPU each on this machine: the chat row is read three times "
        "(`generate.build_tour`, stage 1, stage 2), the connection twice, the last message "
        "and the history separately, `UPDATE tokens SET last_used_at` on every request "
        "(`evacore/store/users.py: user_for_token`, a write per request competing for "
        "SQLite's single writer), the tour row inserted then updated, the retrieval index "
        "written for the new message."),
        ("3. Stage 5 (`memory`) indexes the user's message and searches per tour (13 ms wall "
        "median, no memory configured); stage 14 serialises the diagnostics twice (tour row "
        "and variant meta)."),
        ("4. The rest is the event loop, FastAPI's request handling and auth, and the SSE "
        "response; the per-token part is below."),
    ]


def _per_token(rows: list[dict[str, Any]]) -> list[str]:
    marginal = _value(rows, "cpu_us_per_extra_token")
    return [
        (f"**Per relayed token ({marginal:.0f} µs here).** Each SSE chunk from the upstream "
        "walks httpx → httpcore → h11's chunked reader (about half of the per-token cost), "
        "then the SSE decoder and JSON parse, the tour's event queue, `sse_frame`, "
        "Starlette's `StreamingResponse` and one socket write per event in uvicorn. Done in "
        "`evacore/providers`: httpcore's per-request `import sniffio` (not installed, so each "
        "try searched sys.path) is answered from `sys.modules`; the read deadline is kept "
        "inline instead of a coroutine per chunk; unencoded streams are read raw. Provider "
        "alone, measured in-process: 4.6 → 3.5 ms of CPU per request and 63 → 46 µs per "
        "token. Writing several queued events in one chunk (`generate._stream` draining the "
        "queue) would cut writes when the upstream sends in bursts."),
    ]


def _load(rows: list[dict[str, Any]]) -> list[str]:
    per_tour = _value(rows, "s1_cpu_ms_per_tour")
    capacity = 1000 / per_tour if per_tour and math.isfinite(per_tour) else math.nan
    direct = _value(rows, "s2_direct_streams_per_s")
    share = _value(rows, "s2_evacore_cpu_share")
    return [
        (f"**Concurrency (S2, S3).** At {per_tour:.0f} ms of CPU per tour (S1) a whole core "
         f"finishes at most {capacity:.1f} tours a second, against {direct:.0f} streams a "
         f"second served directly; during S2 evacore used {share:.0f}% of a core (see "
         "`s2_evacore_cpu_share` for how busy its core was with other work). Offered 64 or "
         "256 concurrent streams, tours queue in the event loop, the first token waits "
         "seconds, transactions stay open across the waits, and SQLite's 10 s busy timeout "
         "fires (`database is locked`, seen first on the per-request `UPDATE tokens`), which "
         "the client sees as HTTP 500s or `error` events. Also "
         "`evacore/pipeline/manager.py: _poll_aborts` runs one SELECT per running tour every "
         "0.5 s (512 queries a second at 256 streams); one `WHERE id IN (…) AND "
         "abort_requested` query would do."),
    ]


def _memory(rows: list[dict[str, Any]]) -> list[str]:
    return [
        ("**Memory per extra stream.** The figure is the difference of two peak RSS samples "
        "divided by the extra streams; with few streams (the quick variant) allocator "
        "growth of a few MB dominates it. Judge it on the full run (192 extra streams)."),
    ]


def explain(rows: list[dict[str, Any]]) -> str:
    """Markdown for the missed targets of this run; empty when every target was met."""
    parts: list[list[str]] = []
    if _missed(rows, "s1_cpu_us_per_token", "s2_cpu_us_per_token", "s3_cpu_us_per_token",
               "s1_added_ttft_p50_ms"):
        parts.append(_per_tour(rows))
    if _missed(rows, "s1_cpu_us_per_token", "s2_cpu_us_per_token", "s3_cpu_us_per_token"):
        parts.append(_per_token(rows))
    if _missed(rows, "s2_throughput_vs_direct", "s2_added_ttft_p50_ms", "s3_evacore_errors"):
        parts.append(_load(rows))
    if _missed(rows, "rss_per_extra_stream_kb"):
        parts.append(_memory(rows))
    if not parts:
        return ""
    parts.append([
        ("**This machine.** Two shared cores, busy with other work during the run (see the "
        "load average); a trivial `json.dumps` takes about 10 µs here, 3-4 times a desktop "
        "CPU, so absolute figures are high. Ratios to the direct run and CPU-time figures "
        "travel better than wall-clock ones."),
    ])
    return "\n\n".join("\n".join(p) for p in parts)
