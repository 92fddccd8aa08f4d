"""What limits the relay benchmark's missed targets, written from this run's own rows: every
number in the text is a figure (or a ratio of figures) the same run measured.

Must not: measure, or carry a number of its own. Where the text says where the time goes
inside evacore (which code, which layer), it names code and says so in words, never in
figures from another run.
"""

from __future__ import annotations

import math
from typing import Any


def _row(rows: list[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["metric"] == metric), None)


def _value(rows: list[dict[str, Any]], metric: str) -> float:
    row = _row(rows, metric)
    if row is not None and isinstance(row.get("value"), int | float):
        return float(row["value"])
    return math.nan


def _spread(rows: list[dict[str, Any]], metric: str, unit: str) -> str:
    """`, a–b unit over n runs` for a figure measured more than once, else empty."""
    row = _row(rows, metric)
    if row is None or not row.get("spread") or (row.get("runs") or 1) < 2:
        return ""
    low, high = row["spread"]
    return f", {low:.3g}–{high:.3g} {unit} over {row['runs']} runs"


def _most(rows: list[dict[str, Any]], metric: str) -> float:
    """The highest value a figure took over the runs (its value when measured once)."""
    row = _row(rows, metric)
    if row is not None and row.get("spread"):
        return float(row["spread"][1])
    return _value(rows, metric)


def _missed(rows: list[dict[str, Any]], *names: str) -> bool:
    return any(r.get("met") is False and r["metric"] in names for r in rows)


def _per_tour(rows: list[dict[str, Any]]) -> list[str]:
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    marginal = _value(rows, "cpu_us_per_extra_token")
    s1 = _value(rows, "s1_cpu_us_per_token")
    s1_tour = _value(rows, "s1_cpu_ms_per_tour")
    share = fixed / s1_tour * 100 if s1_tour else math.nan
    return [
        ("**A tour's own cost.** Besides relaying tokens a tour costs "
         f"{fixed:.1f} ms of CPU in this run (`cpu_ms_per_tour_fixed`"
         f"{_spread(rows, 'cpu_ms_per_tour_fixed', 'ms')}), {share:.0f}% of an S1 tour's "
         f"{s1_tour:.1f} ms; a token that arrives in a burst adds {marginal:.1f} µs "
         f"(`cpu_us_per_extra_token`{_spread(rows, 'cpu_us_per_extra_token', 'µs')}). So "
         f"S1's {s1:.1f} µs per token is mostly the fixed part spread over the answer. That "
         "part is the tour around the tokens: the SQL statements of stage 1 (the chat with "
         "its connection, character and persona, the user's message, the tour row), stage 2 "
         "(the history) and stage 14 (the answer's message and variant, the retrieval "
         "index, the tour row), the hot ones pre-built and run straight on the driver "
         "(`evacore/store/direct.py`), the rest through SQLAlchemy's ORM, in three sessions "
         "(stage 1's, the one stages 2-5 share for their reads, `evacore/pipeline/reads.py`, "
         "and stage 14's), each about 200 µs of the ORM's own work besides its statements; "
         "on SQLite every statement and commit runs on the loop's thread unless another "
         "writer holds the lock (a trip to aiosqlite's thread costs about 80 µs; the WAL "
         "checkpoint every 32 commits runs on a thread and connection of its own, "
         "`evacore/store/sqlite_driver.py`), and a session that waits for nothing ends "
         "without a pass of the loop (`evacore/store/db.py`, `close_session`); the "
         "garbage collector's passes over what a tour allocates (a finished tour holds no "
         "reference cycle, so reference counting frees it at once and full passes find "
         "nothing of it to collect); turning the history's rows "
         "into prompt "
         "elements, counting and fitting them, which grows with the chat: every tour reads "
         "as much of it as the context could hold (with short messages and a large context, "
         "all of it; the benchmark's chats are short); the JSON of the tour's "
         "diagnostics; the upstream request; FastAPI's request handling and its middleware. "
         "Settings, linked lorebooks, memory blocks and document presence come from "
         "`evacore/store/recall.py` instead of more queries, and `evacore serve` keeps its "
         "start-up heap out of the garbage collector's full passes (`gc.freeze`)."),
    ]


def _fast_share(rows: list[dict[str, Any]]) -> str:
    """`; …% of the paced tokens went that way (…)`, from the fast-lane rows of this run."""
    shares = [(s, _value(rows, f"{s}_fast_lane_share")) for s in ("paced", "paced5", "s2")]
    known = [f"{share * 100:.1f}% in {s}" for s, share in shares if math.isfinite(share)]
    if not known:
        return ""
    return ("; the tokens that went that way: " + ", ".join(known)
            + " (`<scenario>_fast_lane_share`)")


def _per_token(rows: list[dict[str, Any]]) -> list[str]:
    marginal = _value(rows, "cpu_us_per_extra_token")
    paced = _value(rows, "cpu_us_per_paced_token_own")
    with_tour = _value(rows, "cpu_us_per_paced_token")
    times = paced / marginal if marginal else math.nan
    wakeup = _value(rows, "machine_wakeup_us")
    out = [
        (f"**A token that arrives alone costs {paced:.0f} µs; in a burst, "
         f"{marginal:.1f} µs** ({times:.1f}× as much alone; `cpu_us_per_paced_token_own`"
         f"{_spread(rows, 'cpu_us_per_paced_token_own', 'µs')}: the paced tour twice as "
         "long less the paced tour, so no part of the tour is in it; "
         f"{with_tour:.0f} µs with the part of the tour that costs more between paced tokens "
         "than back to back, `cpu_us_per_paced_token`). S2 and S3 send a token every "
         "5 ms, so every token is its own trip: the upstream socket wakes the event loop, "
         "the llhttp parser (`providers/_stream_client.py`) hands the chunk to its "
         "callback, which (the fast lane, `providers/_fast_lane.py`) checks it holds "
         "nothing but whole plain-text events, parses their JSON, and writes the frame "
         "through uvicorn's `send` and the middleware's wrappers of it to the client's "
         "socket, all in that callback, with no task woken"
         f"{_fast_share(rows)}. In a burst (S1, `long`) one read carries many tokens and "
         "one write sends them all, from the tour's task. A bare loopback round trip on the "
         f"same core took {wakeup:.1f} µs in this run (`machine_wakeup_us`)."),
    ]
    out += _gap(rows, marginal)
    for s in ("paced", "paced5", "s2"):
        floor = _value(rows, f"{s}_floor_cpu_us_per_token")
        mine = _value(rows, f"{s}_cpu_us_per_token")
        if not math.isfinite(floor):
            continue
        target = _target_us(rows)
        verdict = (
            "a per-token target below it cannot be met by any Python relay on this machine."
            if math.isfinite(target) and floor > target else
            "it is under the per-token target, so what exceeds the target is evacore's own "
            "work." if math.isfinite(target) else "")
        out.append(
            f"\n**The floor, {s}.** A bare Python relay that passes the upstream's bytes on "
            "as they come, with no parsing and no storage (`bench/_relay_floor.py`, same "
            f"pinned core, same run) used {floor:.0f} µs per token "
            f"(`{s}_floor_cpu_us_per_token`{_spread(rows, f'{s}_floor_cpu_us_per_token', 'µs')}"
            f") against generate's {mine:.0f} µs, which also carries its tours' fixed part. "
            "That is what the interpreter, the event loop and the kernel charge here for one "
            "read, one write and their wake-ups (with many streams one wake-up serves several "
            "of them, so it falls with concurrency); " + verdict
            + _parsing_words(rows, s, mine, target))
    return out


def _parsing_words(rows: list[dict[str, Any]], s: str, mine: float, target: float) -> str:
    """The same scenario through the bare relay's parsing mode, when it ran."""
    parsed = _value(rows, f"{s}_parsing_floor_cpu_us_per_token")
    if not math.isfinite(parsed):
        return ""
    verdict = (" A per-token target below it is below the least a Python relay keeping "
               "evacore's stream contract spends on this machine."
               if math.isfinite(target) and parsed > target else "")
    return (f" Its parsing mode, which also parses each event and writes evacore's `delta` "
            f"event for it (a token's whole part of the stream contract, and nothing else: "
            f"no tour, no storage), used {parsed:.0f} µs (`{s}_parsing_floor_cpu_us_per_token`"
            f"{_spread(rows, f'{s}_parsing_floor_cpu_us_per_token', 'µs')}), so generate "
            f"spent {mine - parsed:.0f} µs per token more than that least.{verdict}")


def _gap(rows: list[dict[str, Any]], marginal: float) -> list[str]:
    """The same lone token at two gaps, through generate and through the bare relay."""
    near, far = _value(rows, "cpu_us_per_paced_token"), _value(rows, "cpu_us_per_paced5_token")
    floor_near = _value(rows, "paced_floor_cpu_us_per_token")
    floor_far = _value(rows, "paced5_floor_cpu_us_per_token")
    woken = _value(rows, "wakeups_per_paced5_token")
    floor_woken = _value(rows, "paced5_floor_wakeups_per_token")
    if not all(math.isfinite(v) for v in (near, far, floor_near, floor_far)):
        return []
    return [(
        f"\n**The gap before a token.** The same lone token costs more the longer the core "
        f"waited for it: through generate {near:.0f} µs when tokens come 2 ms apart and "
        f"{far:.0f} µs at 5 ms (`cpu_us_per_paced5_token`"
        f"{_spread(rows, 'cpu_us_per_paced5_token', 'µs')}); through the bare relay "
        f"{floor_near:.0f} and {floor_far:.0f} µs; in a burst {marginal:.1f} µs. The code run "
        "per token is the same at both gaps, but a running tour also has work per second: "
        "twice a second the instance asks the database whether another instance was asked "
        "to abort one of its tours, and, while it trusts recently checked tokens, four times a "
        "second it reads the auth epoch (`pipeline/manager.py`, `store/token_cache.py`, one "
        "pre-built statement each), so a token 5 ms after the last carries two and a half times the share of "
        "that work a token 2 ms after it does. The wake-ups per token at 5 ms were "
        f"{woken:.2f} for generate and {floor_woken:.2f} for the bare relay "
        "(`wakeups_per_paced5_token`, `paced5_floor_wakeups_per_token`). What grows with the "
        "gap is the price of running that code cold: after a gap the caches and translation "
        "buffers of the core hold other work, and the more code and data a token touches the "
        "more of it is fetched again for every token: at 5 ms generate's lone token cost "
        f"{far / floor_far:.1f}× the bare relay's, and a token in a burst, run warm, "
        f"{marginal:.1f} µs."
    )]


def _target_us(rows: list[dict[str, Any]]) -> float:
    """The per-token CPU target of this run (`<= N µs` on the paced-token row)."""
    target = str((_row(rows, "cpu_us_per_paced_token_own") or {}).get("target") or "")
    try:
        return float(target.split()[1])
    except (IndexError, ValueError):
        return math.nan


def _first_token(rows: list[dict[str, Any]], ttft: float) -> str:
    """`: the tours' own record …` from the S2 tour-record rows of this run, if any."""
    first = _value(rows, "s2_tour_first_token_ms_p50")
    stages = _value(rows, "s2_tour_stages_ms_p50")
    if not (math.isfinite(first) and math.isfinite(stages)):
        return ""
    waited = _value(rows, "s2_tour_waited_ms_p50")
    turns = _value(rows, "s2_tour_turn_waits")
    behind = ("" if not math.isfinite(turns) else
              "; none waited for its chat's earlier tour" if turns == 0 else
              f"; {turns:.0f} of them waited for their chat's earlier tour, `s2_tour_turn_waits`")
    before = (f", its wait before stage 1 {waited:.1f} ms (`s2_tour_waited_ms_p50`: its task "
              f"starting behind the work already ready{behind})" if math.isfinite(waited)
              else "")
    text = (f": the tours' own records say {first:.0f} ms p50 from a tour's start to its "
            f"first delta (`s2_tour_first_token_ms_p50`), of which its stages before "
            f"streaming took {stages:.1f} ms (`s2_tour_stages_ms_p50`){before}; roughly the "
            f"other {max(0.0, ttft - first):.0f} ms went before the tour started (the loop "
            "noticing the request, uvicorn's task for it starting) or on the way to the client")
    ffirst = _value(rows, "s2_facade_tour_first_token_ms_p50")
    fwaited = _value(rows, "s2_facade_tour_waited_ms_p50")
    fstages = _value(rows, "s2_facade_tour_stages_ms_p50")
    if all(math.isfinite(v) for v in (ffirst, fwaited, fstages)):
        text += (f". The facade's tours in the same scenario: {ffirst:.0f} ms to the first "
                 f"delta, {fwaited:.1f} ms of it before stage 1 and {fstages:.1f} ms in their "
                 "stages: the rest is passes of the loop, which grow when requests arrive "
                 "in bunches (streams that started together end together and ask again "
                 "together) and their work then runs back to back before the network is read "
                 "again")
    return text


def _tail(rows: list[dict[str, Any]]) -> str:
    """` A stream's end waits too …` from the S2 tail rows of this run, if any."""
    mine, direct = _value(rows, "s2_evacore_tail_p50_ms"), _value(rows, "s2_direct_tail_p50_ms")
    if not (math.isfinite(mine) and math.isfinite(direct)):
        return ""
    return (f" A stream's end waits the same way: from its last token to its end S2's streams "
            f"took {mine:.1f} ms p50 through generate (`s2_evacore_tail_p50_ms`) against "
            f"{direct:.2f} ms directly: the rest of the upstream's answer read by the tour's "
            "task (a pass), the save's CPU, then the channel's task writing `message`, `done` "
            "and the end of the response (another pass).")


def _load(rows: list[dict[str, Any]]) -> list[str]:
    rate = _value(rows, "s2_evacore_streams_per_s")
    share = _value(rows, "s2_evacore_cpu_share")
    direct = _value(rows, "s2_direct_streams_per_s")
    per_core = rate / (share / 100) if share else math.nan
    per_token = _value(rows, "s2_cpu_us_per_token")
    ttft = _value(rows, "s2_added_ttft_p50_ms")
    errors3 = _most(rows, "s3_evacore_errors")
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    floor = _value(rows, "s2_floor_cpu_us_per_token")
    floor_rate = _value(rows, "s2_floor_throughput_vs_direct")
    cut3 = _value(rows, "s3_evacore_unfinished")
    return [
        (f"**Concurrency (S2, S3).** Through generate S2 ran {rate:.1f} streams a second "
         f"with evacore using {share:.0f}% of its core (`s2_evacore_cpu_share`, one window), "
         f"which is {per_core:.0f} streams a second per full core, against {direct:.0f} "
         f"served directly; its CPU per S2 token was {per_token:.0f} µs"
         f"{_spread(rows, 's2_cpu_us_per_token', 'µs')}. A new stream's first token waits "
         "for several passes of the event loop on its way: the loop noticing the request, "
         "uvicorn's task for it starting, the tour's task starting, the upstream's head "
         "arriving with its first chunk (the benchmark's upstream sends them together; "
         "that chunk is written from the same callback, the fast lane, before the tour's "
         "task wakes for the head). Each pass first runs all the work that became ready "
         "meanwhile (other streams' tokens, other tours' stages), so a pass grows as the "
         "core's load nears all of it (roughly as 1 / (1 - load)): the tour's own stages "
         "take a few milliseconds of that wait, and S2's added TTFT of "
         f"{ttft:.0f} ms is mostly the passes{_first_token(rows, ttft)}.{_tail(rows)} "
         "It falls with the CPU a tour and a token cost, and with how long the pieces of "
         "work a pass runs are: a finished tour's end, its record's redaction and its writes "
         "are three passes apart (`pipeline/runner.py`, `stages/save.py`), while a new tour's "
         "stages 1-11 stay one (split, every new stream would wait for more passes). Its database "
         "writes do not queue behind each other: a writer that finds the write gate free "
         "goes in at once, and a queue behind a holder that had to wait drains in one pass "
         "(`evacore/store/sqlite_driver.py`). "
         f"S3 ended with at most {errors3:.0f} errors in a run and a median "
         f"of {cut3:.0f} streams still open when the client stopped waiting (SQLite writes "
         "are short transactions; no write happens per token). Each S2 stream costs its "
         f"tour's fixed part ({fixed:.1f} ms, `cpu_ms_per_tour_fixed`, which is "
         f"{fixed * 10:.0f} µs over each of its 100 tokens) plus the relaying of its tokens."
         + (f" The bare relay served S2 at {floor_rate:.2f}× direct with {floor:.0f} µs per "
            "token (`s2_floor_throughput_vs_direct`), so at this concurrency the limit is "
            "evacore's own work, mostly its tours' fixed part." if math.isfinite(floor) else "")
         + _parsing_floor(rows, per_token)),
    ]


def _parsing_floor(rows: list[dict[str, Any]], per_token: float) -> str:
    parsed = _value(rows, "s2_parsing_floor_cpu_us_per_token")
    if not (math.isfinite(parsed) and math.isfinite(per_token)):
        return ""
    return (f" The bare relay's parsing mode, which does a token's whole part of the stream "
            f"contract (its event parsed, its `delta` event written) and nothing else, used "
            f"{parsed:.0f} µs per S2 token (`s2_parsing_floor_cpu_us_per_token`"
            f"{_spread(rows, 's2_parsing_floor_cpu_us_per_token', 'µs')}): of generate's "
            f"{per_token:.0f} µs, the {per_token - parsed:.0f} µs above it are what a tour "
            "adds besides relaying its tokens, spread over them (its request, the user "
            "message's commit, the prompt's assembly, the save).")


def _memory(rows: list[dict[str, Any]]) -> list[str]:
    return [
        ("**Memory per extra stream.** The figure is the growth of the peak RSS from S2 to "
         "S3 over the extra streams, measured on an evacore started for it alone, "
         "several times (`bench/_relay_memory.py`: a process's second S3 reuses what its "
         "first took, so it measures the allocator's reuse, not the streams): the median, "
         f"{_spread(rows, 'rss_per_extra_stream_kb', 'KB')}. Runs of the same code differ by "
         "several KB (where the allocator's pools fall); with few streams (the quick "
         "variant) allocator growth dominates it. Where it goes (S3 against S2 at their "
         "peaks, the interpreter's and glibc's own counters read inside the server): some "
         "two thirds are Python objects of the streams in flight and the interpreter's pools "
         "around them (some 700 to 980 allocated blocks a stream, 330 to 370 of them objects "
         "the collector tracks: 37 KB of them, in 25 dicts, 55 lists, 55 tuples, 30 cells, 16 "
         "coroutines, 16 functions, 14 weak references and 3 tasks a stream), the rest "
         "glibc's heap (a little over half of it in use, the rest free space between "
         "allocations it cannot give back). By the code that made them (tracemalloc, S3 "
         "against S2): "
         "evacore's own lines 21-34 KB a stream, uvicorn's connection 4.6-6.1 (its protocol, "
         "request cycle, parser, flow control and two events, four deques between them), "
         "SQLAlchemy's sessions 4.1-5.0 (under S3's load tours queue for the pool and the "
         "write gate with a session open), asyncio 2.7-3.7, the rest of the standard "
         "library 3.7-4.3, over some 300 sites, none above 3 KB. A streaming tour holds what "
         "it sent, for a next step of the agent loop or a rule's rewrite: by S3's end its "
         "chat holds 20-26 messages, some 5 KB of text and as many message objects a "
         "stream; its diagnostics (6.6 KB: the change log 2.3, the memory stage's 1.1, the "
         "requests' 1.0), the macro environment (1.3) and the chat's and connection's "
         "settings (0.9 each); the rest are its coroutines, closures and events. Cut so "
         "far: the answer so far joined every 16 texts (`JOIN_AT`, `pipeline/events.py`), "
         "the event queue and the upstream connection holding lists, not deques (some 7 KB "
         "a stream, 107.5 against 114.5 KB in a harness running S2 then S3, five runs "
         "each), and the generate route letting go of the request as read (its bytes, JSON "
         "and validated body) and the tour of its expanded input before the answer streams "
         "(some 3.5 KB: a mean of 95.7 against 99.3 KB over six runs each, 92.9-100.6 "
         "against 95.1-104.0). Tried and not kept: glibc's arenas capped at 1 or 2 (no "
         "change: the SQLite threads' arenas are not where it "
         "grows); a fixed mmap threshold of 64 KB (some 4 KB less: 90.4 against 94.5, three "
         "runs each, interleaved), 16 KB (some 10 KB less, for eight mmap/munmap pairs a "
         "tour) or 4 KB (some 15 KB less, for 27). The peak is S3's last moment, not its "
         "first: every S3 tour adds a turn to one of its chats and reads their whole "
         "history, so later tours hold more. SQLite's own memory is bounded "
         "(`evacore/store/db.py`: 128 KiB of pages a pooled connection; at SQLite's default "
         "2,000 KiB the pool's caches grew with the database by about a megabyte a second "
         "of S3, 30-40 KB of the figure)."),
    ]


def _facade(rows: list[dict[str, Any]]) -> list[str]:
    fixed = _value(rows, "cpu_ms_per_tour_fixed")
    ffixed = _value(rows, "facade_cpu_ms_per_tour_fixed")
    extra = _value(rows, "cpu_us_per_extra_token")
    fextra = _value(rows, "facade_cpu_us_per_extra_token")
    s1, fs1 = _value(rows, "s1_cpu_us_per_token"), _value(rows, "s1_facade_cpu_us_per_token")
    text = (f"**The facade next to generate.** The same tours through "
            f"`POST /v1/chat/completions` cost {fs1:.0f} µs per S1 token against generate's "
            f"{s1:.0f} µs: {ffixed:.1f} ms fixed per tour against {fixed:.1f} ms, and "
            f"{fextra:.1f} µs against {extra:.1f} µs per burst token. Per tour the facade "
            "adds the chat lookup before the tour (one pre-built statement for a named chat, "
            "two for a matched one) in a session of its own, and the binding, one statement "
            "in the transaction that saves the answer (two for a chat's first answer); per "
            "token it writes an OpenAI chunk where generate writes a short `delta` event.")
    return [text]


def _litellm(rows: list[dict[str, Any]]) -> list[str]:
    if not math.isfinite(_value(rows, "s1_litellm_cpu_us_per_token")):
        note = (_row(rows, "litellm_proxy") or {}).get("note") or "not installed"
        return [f"**The LiteLLM proxy.** Not measured in this run: {note}."]
    parts = []
    for s in ("s1", "long", "paced", "s2", "s3"):
        lite = _value(rows, f"{s}_litellm_cpu_us_per_token")
        facade = _value(rows, f"{s}_facade_cpu_us_per_token")
        ratio = _value(rows, f"{s}_litellm_over_facade_cpu_per_token")
        if math.isfinite(lite) and math.isfinite(facade):
            parts.append(f"{s} {lite:.0f} against {facade:.0f} µs ({ratio:.2f}×)")
    s2 = _value(rows, "s2_litellm_over_facade_streams_per_s")
    fixed = _value(rows, "litellm_cpu_ms_per_tour_fixed")
    extra = _value(rows, "litellm_cpu_us_per_extra_token")
    split = (f" Its own split: {fixed:.1f} ms fixed per request and {extra:.1f} µs per burst "
             "token." if math.isfinite(fixed) and math.isfinite(extra) else "")
    served = (f" In S2 it served {s2:.2f}× the facade's streams a second."
              if math.isfinite(s2) else "")
    errors = sum(_most(rows, f"{s}_litellm_errors") for s in ("s1", "long", "paced", "s2", "s3")
                 if math.isfinite(_most(rows, f"{s}_litellm_errors")))
    cut = _value(rows, "s3_litellm_unfinished")
    s3_rate = _value(rows, "s3_litellm_streams_per_s")
    return [
        ("**The LiteLLM proxy, side by side.** Measured in this run on the same pinned core "
         "against the same fake upstream, the proxy's CPU per token against the facade's "
         "(the route that speaks its protocol): " + "; ".join(parts) + "." + split + served
         + f" Its errors over the scenarios, the worst run of each: {errors:.0f}. In S3 it "
         f"finished {s3_rate:.1f} streams a second, with a median of {cut:.0f} streams still "
         "open when the client stopped waiting. The proxy keeps no chat and "
         "writes nothing per request here (no database configured), while every evacore "
         "tour is stored."),
    ]


def _litellm_floor(rows: list[dict[str, Any]]) -> list[str]:
    """The paced token's target against LiteLLM, set against what the bare relay reaches."""
    found = []
    for s, pace in (("paced", "2 ms"), ("paced5", "5 ms")):
        lite = _value(rows, f"{s}_litellm_cpu_us_per_token")
        floor = _value(rows, f"{s}_floor_cpu_us_per_token")
        mine = _value(rows, f"{s}_litellm_over_evacore_cpu_per_token")
        parsed = _value(rows, f"{s}_parsing_floor_cpu_us_per_token")
        if math.isfinite(lite) and math.isfinite(floor) and floor and math.isfinite(mine):
            found.append(f"{pace} apart, LiteLLM's {lite:.0f} µs a paced token is "
                         f"{lite / floor:.1f}× the bare relay's {floor:.0f}"
                         + (f", {lite / parsed:.1f}× its parsing mode's {parsed:.0f}"
                            if math.isfinite(parsed) and parsed else "")
                         + f" and {mine:.1f}× generate's")
    if not found:
        return []
    own = _value(rows, "cpu_us_per_paced_token_own")
    share = _value(rows, "paced_token_own_over_litellm")
    lite = _value(rows, "litellm_cpu_us_per_paced_token_own")
    floor_own = _value(rows, "paced_floor_cpu_us_per_token_own")
    parsed_own = _value(rows, "paced_parsing_floor_cpu_us_per_token_own")
    own_words = ""
    if all(math.isfinite(v) and v > 0 for v in (own, share, lite, floor_own, parsed_own)):
        own_words = (
            f" A paced token's own CPU (no part of its tour in it, 2 ms apart) was "
            f"{own:.1f} µs through generate, {lite:.0f} µs through LiteLLM "
            f"(`litellm_cpu_us_per_paced_token_own`; the ratio's median over the runs "
            f"{share:.3f}, `paced_token_own_over_litellm`), {floor_own:.1f} µs through "
            f"the bare relay and {parsed_own:.1f} µs through its parsing mode: a twentieth "
            f"of LiteLLM's is {lite / 20:.1f} µs, "
            + ("below the bare relay's own token." if lite / 20 < floor_own else
               "below the parsing relay's own token." if lite / 20 < parsed_own else
               "above the parsing relay's own token."))
    return [("**A paced token against LiteLLM's.** The target asks evacore to spend at most "
             "a twentieth of LiteLLM's CPU on a paced token. In this run, "
             + "; ".join(found) + ": a relay that only copies each chunk from one socket to "
             "the other, with no parsing and no storage, is the most any Python relay on "
             "this core could reach, and the system calls and wake-up of every token are "
             "most of its cost." + own_words)]


def explain(rows: list[dict[str, Any]]) -> str:
    """Markdown for the missed targets of this run and the side-by-side comparisons; empty
    when every target was met and nothing was compared."""
    parts: list[list[str]] = []
    cpu = ("s2_cpu_us_per_token", "s3_cpu_us_per_token", "cpu_us_per_paced_token_own",
           "paced_token_own_over_litellm")
    if _missed(rows, *cpu, "s1_added_ttft_p50_ms", "cpu_ms_per_tour_fixed"):
        parts.append(_per_tour(rows))
    if _missed(rows, *cpu):
        parts.append(_per_token(rows))
    if _missed(rows, "s2_throughput_vs_direct", "s2_added_ttft_p50_ms", "s3_evacore_errors"):
        parts.append(_load(rows))
    if _missed(rows, "rss_per_extra_stream_kb"):
        parts.append(_memory(rows))
    if math.isfinite(_value(rows, "s1_facade_cpu_us_per_token")):
        parts.append(_facade(rows))
    if _row(rows, "litellm_proxy") is not None:
        parts.append(_litellm(rows))
    if against_floor := _litellm_floor(rows):
        parts.append(against_floor)
    if not parts:
        return ""
    speed = _value(rows, "machine_speed_us")
    wakeups = _value(rows, "machine_wakeup_us")
    s1 = _row(rows, "s1_cpu_us_per_token") or {}
    drift = ""
    if s1.get("spread") and (s1.get("runs") or 1) > 1:
        low, high = s1["spread"]
        drift = (f" S1's CPU per token ranged {low:.1f}–{high:.1f} µs over the "
                 f"{s1['runs']} runs of this benchmark, {(high - low) / low * 100:.0f}% of "
                 "its lowest value.")
    parts.append([
        ("**This machine.** Shared cores whose speed drifts with other work on the host."
         f"{drift} `machine_speed_us` ({speed:.2f} µs"
         f"{_spread(rows, 'machine_speed_us', 'µs')}) times pure Python and "
         f"`machine_wakeup_us` ({wakeups:.2f} µs{_spread(rows, 'machine_wakeup_us', 'µs')}) "
         "a loopback round trip, both on evacore's CPU before and after the scenarios, to "
         "set other runs against. Ratios measured side by side in one run (to the direct "
         "run, to the LiteLLM proxy) travel better than absolute figures."),
    ])
    return "\n\n".join("\n".join(p) for p in parts)
