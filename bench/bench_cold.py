"""What the same work costs when it runs cold: evacore's CPU for the same one-token tour back
to back and after the process sat idle, and for the same paced stream with its tokens 1 ms and
5 ms apart, each beside the bare relay (`_relay_floor.py`) doing its own part of that work in
the same run. And a paced token's own CPU with no tour in it: the difference between a
stream twice as long and the stream, both 2 ms a token (`MARGINAL_TOKENS`), for evacore, the
bare relay and the bare relay's parsing mode (the least a relay keeping evacore's stream
contract does) in turn, with the read and write system calls such a token makes in each.

A real model's tokens arrive a few ms apart and a real user's tours seconds apart: between
them the process sleeps, the core serves others and the caches forget the interpreter's code
and data. These rows show how much of a paced token's and a tour's CPU is that effect, which
every process on the machine pays (the floor's rows), and how evacore's footprint magnifies it.

Must not: bind anything but loopback or download anything; the server runs on a fresh SQLite
data folder that is removed afterwards.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs

TOKEN = "bench-master-token-0123456789abcdef"
IDLE_S = 0.4
"""The pause before each cold tour: a user reading the last answer is far longer."""
ROUNDS, QUICK_ROUNDS = 12, 2
PACED_TOKENS = 100
GAPS_MS = (1.0, 5.0)
WARM_TOURS, QUICK_WARM_TOURS = 5, 1
MARGINAL_TOKENS = (200, 400)
MARGINAL_GAP_MS = 2.0
MARGINAL_ROUNDS, QUICK_MARGINAL_ROUNDS = 15, 5
"""Requests of each length, the two lengths alternated (which goes first flips each round) so
that a drift of the shared machine falls on both."""
MESSAGE = "Hello there, how are you today?"
FLOOR_BODY = {"model": "bench-model", "stream": True,
              "messages": [{"role": "user", "content": MESSAGE}]}


def _row(metric: str, value: float | None, unit: str, note: str) -> dict[str, Any]:
    return {"metric": metric, "value": value, "unit": unit, "target": None, "met": None,
            "note": note}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


class _Target:
    """One process to measure and the request that makes it work: a streamed tour on an
    evacore chat, or one relayed completion through the bare relay."""

    def __init__(self, http: httpx.Client, pid: int, url: str, body: dict[str, Any]) -> None:
        self.http, self.pid, self.url, self.body = http, pid, url, body
        self.calls: int | None = None
        """The read and write system calls of the last request (None: not counted here)."""

    def once(self) -> float:
        """The process's CPU (all threads) in µs over one streamed request, read to its end;
        its system calls in `calls`."""
        calls, mark = procs.syscalls(self.pid), procs.CpuMark(self.pid)
        with self.http.stream("POST", self.url, json=self.body) as r:
            r.raise_for_status()
            for _ in r.iter_raw():
                pass
        spent = mark.since()[0] / 1e3
        after = procs.syscalls(self.pid)
        self.calls = None if calls is None or after is None else after - calls
        return spent

    def warmed(self, tours: int) -> _Target:
        """Itself after `tours` unmeasured requests: first uses are not steady state."""
        for _ in range(tours):
            self.once()
        return self

    def in_turn(self, longer: _Target, rounds: int
                ) -> dict[_Target, list[tuple[float, int | None]]]:
        """`rounds` requests of this target and of `longer`, one of each a round, which goes
        first flipping each round: each one's (CPU µs, system calls) in round order."""
        runs: dict[_Target, list[tuple[float, int | None]]] = {self: [], longer: []}
        for i in range(rounds):
            for target in ((longer, self) if i % 2 else (self, longer)):
                runs[target].append((target.once(), target.calls))
        return runs

    def marginal(self, longer: _Target, extra_tokens: int, rounds: int
                 ) -> tuple[float, float | None]:
        """µs of CPU and read and write system calls per token of `longer`'s stream beyond
        this one's (medians over rounds of the two in turn): a token's own cost, with no
        request or tour in it (None for the calls where the kernel does not count them)."""
        runs = self.in_turn(longer, rounds)

        def per_token(values: Callable[[_Target], list[Any]]) -> float:
            return (statistics.median(values(longer))
                    - statistics.median(values(self))) / extra_tokens

        cpu = per_token(lambda target: [spent for spent, _ in runs[target]])
        if any(calls is None for run in runs.values() for _, calls in run):
            return cpu, None
        return cpu, per_token(lambda target: [calls for _, calls in runs[target]])

    def median(self, rounds: int, idle: float = 0.0) -> float:
        costs = []
        for _ in range(rounds):
            if idle:
                time.sleep(idle)
            costs.append(self.once())
        return statistics.median(costs)


class _Evacore:
    def __init__(self, url: str, warm: int) -> None:
        self.warm = warm
        self.http = httpx.Client(timeout=120, headers={"Authorization": f"Bearer {TOKEN}"})
        self.base = url + "/v1"

    def chat(self, pid: int, upstream: str, tokens: int) -> _Target:
        r = self.http.post(self.base + "/connections", json={
            "name": f"bench-cold-{upstream.rsplit(':', 1)[1]}", "kind": "openai-chat",
            "base_url": upstream, "model": "bench-model", "max_tokens": tokens * 2,
            "context_size": 65536})
        r.raise_for_status()
        r = self.http.post(self.base + "/chats", json={"connection_id": r.json()["id"],
                                                       "title": "bench cold"})
        r.raise_for_status()
        return _Target(self.http, pid, f"{self.base}/chats/{r.json()['id']}/generate",
                       {"message": {"content": MESSAGE}, "stream": True}).warmed(self.warm)


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Both processes pinned to one core, the upstreams and this client to the other; every
    figure is a median over sequential requests."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    warm = QUICK_WARM_TOURS if quick else WARM_TOURS
    server_prefix, load_prefix, _ = procs.pinning()
    children: list[procs.Child] = []
    with tempfile.TemporaryDirectory(prefix="evacore-bench-cold-") as tmp:
        folder = Path(tmp)
        try:
            one, one_url = procs.upstream(load_prefix, folder, 1, 0)
            children.append(one)
            paced = {}
            for gap in GAPS_MS:
                child, url = procs.upstream(load_prefix, folder, PACED_TOKENS, gap)
                children.append(child)
                paced[gap] = url
            lengths = {}
            for tokens in MARGINAL_TOKENS:
                child, url = procs.upstream(load_prefix, folder, tokens, MARGINAL_GAP_MS)
                children.append(child)
                lengths[tokens] = url
            server, server_url = procs.server(server_prefix, folder, TOKEN)
            children.append(server)
            evacore = _Evacore(server_url, warm)
            floors = {}
            parsing = {}
            for name, url in (("one", one_url), *paced.items(), *lengths.items()):
                for kind, parse in ((floors, False), (parsing, True)):
                    if parse and name not in lengths:
                        continue
                    child, floor_url = procs.floor(server_prefix, folder, url, parse=parse)
                    children.append(child)
                    kind[name] = _Target(evacore.http, child.pid,
                                         floor_url + "/v1/chat/completions",
                                         FLOOR_BODY).warmed(warm)
            tour = evacore.chat(server.pid, one_url, 1)
            hot_ms = tour.median(rounds) / 1e3
            cold_ms = tour.median(rounds, IDLE_S) / 1e3
            floor_hot = floors["one"].median(rounds)
            floor_cold = floors["one"].median(rounds, IDLE_S)
            per_token = {}
            for gap, url in paced.items():
                chat = evacore.chat(server.pid, url, PACED_TOKENS)
                per_token[gap] = (chat.median(rounds) / PACED_TOKENS,
                                  floors[gap].median(rounds) / PACED_TOKENS)
            short_n, long_n = MARGINAL_TOKENS
            marginal_rounds = QUICK_MARGINAL_ROUNDS if quick else MARGINAL_ROUNDS
            short_chat = evacore.chat(server.pid, lengths[short_n], short_n)
            long_chat = evacore.chat(server.pid, lengths[long_n], long_n)
            own, own_calls = short_chat.marginal(long_chat, long_n - short_n, marginal_rounds)
            bare, bare_calls = floors[short_n].marginal(floors[long_n], long_n - short_n,
                                                        marginal_rounds)
            parsed, _ = parsing[short_n].marginal(parsing[long_n], long_n - short_n,
                                                  marginal_rounds)
            evacore.http.close()
        except Exception as exc:
            tails = "\n".join(c.tail()[-1500:] for c in children)
            raise RuntimeError(f"cold bench failed: {exc}\n{tails}") from exc
        finally:
            for child in reversed(children):
                child.stop()
    fast, slow = GAPS_MS
    how = f"median of {rounds} sequential requests; the process's CPU, all threads"
    idle = f"each after {IDLE_S * 1000:g} ms with no request"
    return [
        _row("tour_cpu_ms_back_to_back", round(hot_ms, 2), "ms",
             f"a one-token streamed tour, the next starting as the last ends; {how}"),
        _row("tour_cpu_ms_after_idle", round(cold_ms, 2), "ms",
             f"the same tour, {idle}; {how}"),
        _row("tour_after_idle_over_back_to_back", _ratio(cold_ms, hot_ms), "x",
             "the same tour's CPU after the pause over back to back, same run"),
        _row("floor_request_cpu_us_back_to_back", round(floor_hot, 1), "µs",
             f"one relayed one-token completion through the bare relay; {how}"),
        _row("floor_request_cpu_us_after_idle", round(floor_cold, 1), "µs",
             f"the same, {idle}; {how}"),
        _row("floor_after_idle_over_back_to_back", _ratio(floor_cold, floor_hot), "x",
             "the bare relay's request after the pause over back to back, same run"),
        *[row for gap in GAPS_MS for row in (
            _row(f"paced_{gap:g}ms_evacore_cpu_us_per_token", round(per_token[gap][0], 1),
                 "µs", f"a tour's CPU / its {PACED_TOKENS} tokens, {gap:g} ms apart; {how}"),
            _row(f"paced_{gap:g}ms_floor_cpu_us_per_token", round(per_token[gap][1], 1),
                 "µs", f"the bare relay's, same stream; {how}"),
            _row(f"paced_{gap:g}ms_evacore_over_floor",
                 _ratio(per_token[gap][0], per_token[gap][1]), "x",
                 f"tokens {gap:g} ms apart, same run"))],
        _row("paced_2ms_evacore_marginal_cpu_us_per_token", round(own, 1), "µs",
             f"(CPU of a {MARGINAL_TOKENS[1]}-token tour - CPU of a {MARGINAL_TOKENS[0]}-token "
             f"tour) / {MARGINAL_TOKENS[1] - MARGINAL_TOKENS[0]}, tokens {MARGINAL_GAP_MS:g} ms "
             f"apart: a lone token's own CPU, no tour's part in it; medians of "
             f"{marginal_rounds} requests of each, in turn"),
        _row("paced_2ms_floor_marginal_cpu_us_per_token", round(bare, 1), "µs",
             "the same for the bare relay, same streams, in the same run"),
        _row("paced_2ms_evacore_marginal_over_floor", _ratio(own, bare), "x",
             "a lone token's own CPU, evacore over the bare relay"),
        _row("paced_2ms_parsing_floor_marginal_cpu_us_per_token", round(parsed, 1), "µs",
             "the same for the bare relay's parsing mode (`--parse`: each event's JSON parsed, "
             "each text written on as evacore's `delta` event, nothing stored or checked): the "
             "least a relay keeping evacore's stream contract does, same streams, same run"),
        _row("paced_2ms_evacore_marginal_over_parsing_floor", _ratio(own, parsed), "x",
             "a lone token's own CPU, evacore over the parsing relay"),
        _row("paced_2ms_evacore_marginal_syscalls_per_token", _calls(own_calls), "calls",
             "the same streams' read and write system calls (/proc/<pid>/io `syscr` + "
             "`syscw`) per token beyond the shorter stream's: a lone token's own"),
        _row("paced_2ms_floor_marginal_syscalls_per_token", _calls(bare_calls), "calls",
             "the same for the bare relay: one read of the upstream's chunk and one write to "
             "the client is the least any relay makes"),
        _row("evacore_token_slow_over_fast", _ratio(per_token[slow][0], per_token[fast][0]),
             "x", f"evacore's CPU per token with tokens {slow:g} ms apart over {fast:g} ms"),
        _row("floor_token_slow_over_fast", _ratio(per_token[slow][1], per_token[fast][1]),
             "x", f"the bare relay's, {slow:g} ms apart over {fast:g} ms: the same bytes, "
                  "the same system calls, only the sleep between them longer"),
    ]


def _calls(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def explain(rows: list[dict[str, Any]]) -> str:
    """What the rows say, in words, from their own figures."""
    value = {r["metric"]: r.get("value") for r in rows}
    needed = ("tour_after_idle_over_back_to_back", "floor_after_idle_over_back_to_back",
              "floor_token_slow_over_fast",
              "evacore_token_slow_over_fast", "tour_cpu_ms_back_to_back",
              "tour_cpu_ms_after_idle")
    if any(not isinstance(value.get(k), int | float) for k in needed):
        return ""
    fast, slow = GAPS_MS
    return (
        f"The same one-token tour took {value['tour_cpu_ms_back_to_back']:g} ms of CPU back to "
        f"back and {value['tour_cpu_ms_after_idle']:g} ms after {IDLE_S * 1000:g} ms idle "
        f"({value['tour_after_idle_over_back_to_back']:g}x); the bare relay's request "
        f"{value['floor_after_idle_over_back_to_back']:g}x. With a stream's tokens "
        f"{slow:g} ms apart instead of {fast:g} ms, the bare relay's CPU per token grew "
        f"{value['floor_token_slow_over_fast']:g}x and evacore's "
        f"{value['evacore_token_slow_over_fast']:g}x: the same instructions cost more the "
        "longer the process slept before them (caches and the core shared with others), "
        "which no code change removes; what evacore can change is how much code and data "
        "each wake-up touches, which the evacore-over-floor rows show."
        + _marginal_words(value))


def _marginal_words(value: dict[str, Any]) -> str:
    own = value.get("paced_2ms_evacore_marginal_cpu_us_per_token")
    bare = value.get("paced_2ms_floor_marginal_cpu_us_per_token")
    if not isinstance(own, int | float) or not isinstance(bare, int | float):
        return ""
    short_n, long_n = MARGINAL_TOKENS
    text = (f" A lone token's own CPU, from a {long_n}-token stream less a {short_n}-token one "
            f"(no tour's part in it), was {own:g} µs through evacore and {bare:g} µs through "
            f"the bare relay, {MARGINAL_GAP_MS:g} ms apart: evacore's own work on a paced "
            f"token is the {own - bare:.0f} µs between them.")
    parsed = value.get("paced_2ms_parsing_floor_marginal_cpu_us_per_token")
    if isinstance(parsed, int | float):
        text += (f" The bare relay's parsing mode, which parses each event's JSON and writes "
                 f"evacore's `delta` event and does nothing else (no storage, no checks, no "
                 f"tour), spent {parsed:g} µs on such a token: the least a Python relay keeping "
                 f"evacore's stream contract spends here; evacore spends {own - parsed:.0f} µs "
                 "more.")
    calls = value.get("paced_2ms_evacore_marginal_syscalls_per_token")
    floor_calls = value.get("paced_2ms_floor_marginal_syscalls_per_token")
    if isinstance(calls, int | float) and isinstance(floor_calls, int | float):
        text += (f" Such a token cost evacore {calls:g} read and write system calls and the "
                 f"bare relay {floor_calls:g}: both make the same system calls for it, and the "
                 "difference in CPU is code run in the process (the profile benchmark's "
                 "native split says which).")
    return text
