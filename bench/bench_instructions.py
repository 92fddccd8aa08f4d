"""What a tour and a token cost in instructions, counted by valgrind's callgrind: the same
count whether the shared machine is busy or idle, so a change's effect shows here even when
the timings of the other benchmarks drown it.

The server runs under callgrind with counting off; it is switched on only around the
measured requests, and the instructions the process spends as long while idle (its pollers
and heartbeat) are subtracted. Rows: a one-token tour on a fresh chat; the fast lane's part
of a paced token (httptools' body callback: the upstream's chunk parsed, checked, framed and
written to the client); the bare relay's instructions per token on the same stream, and its
parsing mode's (the least a relay keeping evacore's stream contract does); and
what each stored message of a long chat adds to a tour; the same one-token tour through the
OpenAI-compatible facade. A paced token's whole-process count
is left out: the abort poll runs by the clock while a tour runs, and callgrind stretches a
paced tour's clock by how busy the machine is (it moved by a third between runs). Only the process's own (user-space)
instructions count: the kernel's system calls are not in these figures.

Must not: bind anything but loopback, download anything, or fail when valgrind is missing (a
row says so).
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs
import httpx
import orjson
from bench_chat_length import TOKEN, _Chats, _row
from bench_cold import FLOOR_BODY, _Target

REPEATS = 1
"""Instruction counts repeat closely from run to run (the fast lane's within 1 %); a tour's
is the median of several counting windows (`WINDOWS`), which the abort poll's runs move by
several percent each: one run is enough."""
TOURS, QUICK_TOURS = 20, 3
WINDOWS, QUICK_WINDOWS = 3, 1
"""Counting windows of `TOURS` tours each for the one-token tours: their median is the
figure (a window's count moves by the abort poll's runs in it, which the clock decides)."""
PER_CHAT = 4
"""One-token tours per chat: the history stays short."""
PACED_TOKENS, PACED_DELAY_MS = 100, 20.0
"""Far enough apart that, though callgrind slows the server many times, each token still
comes alone (the fast lane's case) rather than in bursts (the ordinary path's)."""
PACED_TOURS, QUICK_PACED_TOURS = 3, 1
LONG_FILL, QUICK_LONG_FILL = 150, 10
"""One-token tours that fill the long chat (two stored messages each)."""
LONG_TOURS, QUICK_LONG_TOURS = 5, 1
CALLGRIND = ("--tool=callgrind", "--instr-atstart=no")
ON_BODY = "parser_cb_on_body"
"""httptools' body callback: evacore's fast lane runs inside it, once per upstream chunk."""
STREAM_READ = "__uv_stream_on_read"
"""uvloop's read callback of a stream: the bare relay's whole token runs inside it."""


def _tools() -> tuple[str, str, str] | None:
    found = tuple(shutil.which(t) for t in ("valgrind", "callgrind_control",
                                           "callgrind_annotate"))
    return found if all(found) else None  # type: ignore[return-value]


def totals(dump: str) -> int:
    """The instructions a callgrind dump counted (its `summary:` or `totals:` line)."""
    found = [int(m.group(1))
             for m in re.finditer(r"^(?:summary|totals):\s+(\d+)", dump, re.MULTILINE)]
    return max(found, default=0)


def inclusive_per_call(annotated: str, function: str) -> tuple[int, int] | None:
    """(instructions including callees, calls) of `function` from `callgrind_annotate
    --tree=caller --inclusive=yes`: its `*` line and the callers' `<` lines above it (a
    recursive copy, named with a `'`, is left out)."""
    lines = annotated.splitlines()
    for i, line in enumerate(lines):
        if "*  " in line and f"{function} [" in line and "'" not in line.split("[")[0]:
            total = int(line.split()[0].replace(",", ""))
            calls = 0
            for above in reversed(lines[:i]):
                if "<" not in above:
                    break
                m = re.search(r"\(([\d,]+)x\)", above)
                if m and "'" not in above.split("[")[0]:
                    calls += int(m.group(1).replace(",", ""))
            return (total, calls) if calls else None
    return None


class _Counted:
    """A child process under callgrind; `count(work)` is the instructions `work()` made it
    spend, its idle instructions over as long subtracted, and the dump's path."""

    def __init__(self, child: procs.Child, control: str, folder: Path) -> None:
        self.child, self.control, self.folder = child, control, folder
        self.dumps = 0

    def _toggle(self, on: bool) -> None:
        subprocess.run([self.control, "-i", "on" if on else "off", str(self.child.pid)],
                       check=True, capture_output=True, timeout=60)

    def _dump(self) -> Path:
        subprocess.run([self.control, "-d", str(self.child.pid)], check=True,
                       capture_output=True, timeout=120)
        self.dumps += 1
        path = self.folder / f"cg.out.{self.dumps}"
        for _ in range(100):
            if path.exists() and totals(path.read_text(errors="replace")):
                return path
            time.sleep(0.1)
        raise RuntimeError(f"callgrind wrote no dump {path.name}")

    def count(self, work: Callable[[], object]) -> tuple[int, Path]:
        self._toggle(True)
        started = time.monotonic()
        work()
        took = time.monotonic() - started
        self._toggle(False)
        busy = self._dump()
        self._toggle(True)
        time.sleep(took)
        self._toggle(False)
        idle = self._dump()
        return (totals(busy.read_text(errors="replace"))
                - totals(idle.read_text(errors="replace"))), busy


def _tours(chats: _Chats, tours: int, chat: str | None = None) -> None:
    current = chat or chats.new()
    for i in range(tours):
        if chat is None and i and i % PER_CHAT == 0:
            current = chats.new()
        chats.tour(current)


class _Facade:
    """One-token tours through the OpenAI-compatible facade on chats of `chats`' connection
    (named by `X-Evacore-Chat`), a new chat every `PER_CHAT`, each request the whole
    conversation so far as a client sends it."""

    def __init__(self, chats: _Chats) -> None:
        self.chats = chats
        self.model = "@" + str(chats.http.get(f"/connections/{chats.connection}").json()["name"])
        self.done = 0
        self.chat = ""
        self.messages: list[dict[str, str]] = []

    def tours(self, count: int) -> None:
        for _ in range(count):
            if self.done % PER_CHAT == 0:
                self.chat, self.messages = self.chats.new(), []
            self.messages.append({"role": "user", "content": f"Turn {self.done}."})
            r = self.chats.http.post(
                "/chat/completions", headers={"X-Evacore-Chat": self.chat},
                json={"model": self.model, "messages": self.messages, "stream": True})
            r.raise_for_status()
            text = "".join(
                choice["delta"].get("content") or ""
                for line in r.text.splitlines() if line.startswith("data: {")
                for choice in orjson.loads(line[6:])["choices"])
            self.messages.append({"role": "assistant", "content": text})
            self.done += 1


def _per_call(annotate: str, dump: Path, function: str) -> float | None:
    out = subprocess.run([annotate, "--tree=caller", "--inclusive=yes", "--threshold=100",
                          str(dump)], capture_output=True, text=True, timeout=300, check=False)
    found = inclusive_per_call(out.stdout, function)
    return found[0] / found[1] if found else None


def _measure(tools: tuple[str, str, str], quick: bool, folder: Path) -> dict[str, Any]:
    valgrind, control, annotate = tools
    prefix = [valgrind, *CALLGRIND]
    _, load_prefix, _ = procs.pinning()
    one, one_url = procs.upstream(load_prefix, folder, 1, 0)
    paced, paced_url = procs.upstream(load_prefix, folder, PACED_TOKENS, PACED_DELAY_MS)
    children = [one, paced]
    out: dict[str, Any] = {}
    try:
        server, url = procs.server(
            [*prefix, f"--callgrind-out-file={folder / 'cg.out'}"], folder, TOKEN)
        children.append(server)
        counted = _Counted(server, control, folder)
        chats = _Chats(url, one_url)
        paced_chats = _Chats(url, paced_url, max_tokens=2 * PACED_TOKENS, name="bench-paced")
        _tours(chats, 8)
        _tours(paced_chats, 1)
        tours = QUICK_TOURS if quick else TOURS
        windows = QUICK_WINDOWS if quick else WINDOWS
        out["tour"] = statistics.median(
            counted.count(lambda: _tours(chats, tours))[0] for _ in range(windows)) / tours
        facade = _Facade(chats)
        facade.tours(PER_CHAT)
        out["facade_tour"] = statistics.median(
            counted.count(lambda: facade.tours(tours))[0] for _ in range(windows)) / tours
        paced_tours = QUICK_PACED_TOURS if quick else PACED_TOURS
        _, dump = counted.count(lambda: _tours(paced_chats, paced_tours))
        out["fast_lane"] = _per_call(annotate, dump, ON_BODY)
        out["fast_lane_read"] = _per_call(annotate, dump, STREAM_READ)
        long_chat = chats.new()
        _tours(chats, QUICK_LONG_FILL if quick else LONG_FILL, long_chat)
        long_tours = QUICK_LONG_TOURS if quick else LONG_TOURS
        spent, _ = counted.count(lambda: _tours(chats, long_tours, long_chat))
        out["long_tour"] = spent / long_tours
        out["long_messages"] = chats.messages(long_chat)
        chats.http.close()
        paced_chats.http.close()
        server.stop()

        for name, parse in (("floor", False), ("parsing_floor", True)):
            (folder / name).mkdir(exist_ok=True)
            floor, floor_url = procs.floor(
                [*prefix, f"--callgrind-out-file={folder / name / 'cg.out'}"], folder,
                paced_url, parse=parse)
            children.append(floor)
            floor_counted = _Counted(floor, control, folder / name)
            with httpx.Client(timeout=300) as http:
                relay = _Target(http, floor.pid, floor_url + "/v1/chat/completions", FLOOR_BODY)
                relay.once()
                spent, dump = floor_counted.count(
                    lambda relay=relay: [relay.once() for _ in range(paced_tours)])
            out[f"{name}_token"] = spent / paced_tours / PACED_TOKENS
            out[f"{name}_read"] = _per_call(annotate, dump, STREAM_READ)
            if parse:
                out[f"{name}_body"] = _per_call(annotate, dump, ON_BODY)
            floor.stop()
    finally:
        for child in reversed(children):
            child.stop()
    return out


def _windows(quick: bool) -> str:
    windows, tours = (QUICK_WINDOWS, QUICK_TOURS) if quick else (WINDOWS, TOURS)
    return (f"the median of {windows} windows of {tours} tours" if windows > 1
            else f"one window of {tours} tours")


def _k(value: float | None) -> float | None:
    return None if value is None else round(value / 1000, 1)


def _over(a: float | None, b: float | None, digits: int) -> float | None:
    return round(a / b, digits) if a and b else None


def run(quick: bool = False) -> list[dict[str, Any]]:
    tools = _tools()
    if tools is None:
        return [_row("callgrind", None, "", "valgrind is not installed (Debian's valgrind): "
                     "no instruction counts")]
    with tempfile.TemporaryDirectory(prefix="evacore-bench-instructions-") as tmp:
        m = _measure(tools, quick, Path(tmp))
    paced = f"{PACED_TOKENS}-token tours, a token every {PACED_DELAY_MS:g} ms"
    fresh_messages = 2 * PER_CHAT
    per_message = ((m["long_tour"] - m["tour"]) / (m["long_messages"] - fresh_messages)
                   if m["long_messages"] > fresh_messages else None)
    return [
        _row("tour_instructions_m", round(m["tour"] / 1e6, 2), "M",
             f"a one-token streamed tour, a new chat every {PER_CHAT}; the process's "
             "instructions, its idle ones subtracted (the abort poll that runs while tours "
             f"run is not); {_windows(quick)}"),
        _row("facade_tour_instructions_m", round(m["facade_tour"] / 1e6, 2), "M",
             "the same tour through the OpenAI-compatible facade (`POST /v1/chat/completions`"
             ", the chat named by `X-Evacore-Chat`, the whole conversation sent each time), "
             "counted the same way"),
        _row("facade_over_tour", round(m["facade_tour"] / m["tour"], 3), "x",
             "the facade's tour over generate's, same run: the chat lookup, the binding and "
             "OpenAI's chunks"),
        _row("fast_lane_instructions_k", _k(m["fast_lane"]), "k",
             f"httptools' body callback per call, {paced}: the upstream's chunk parsed, "
             "checked, framed and written to the client (evacore's fast lane)"),
        _row("floor_token_instructions_k", _k(m["floor_token"]), "k",
             f"the bare relay's instructions per token, same stream ({paced})"),
        _row("floor_read_instructions_k", _k(m["floor_read"]), "k",
             "the bare relay's read callback per call: a token read and written on"),
        _row("fast_lane_over_floor_read", _over(m["fast_lane"], m["floor_read"], 1), "x",
             "evacore's fast lane over the bare relay's read callback, per token"),
        _row("parsing_floor_token_instructions_k", _k(m["parsing_floor_token"]), "k",
             f"the bare relay's parsing mode (`_relay_floor.py --parse`: each event's JSON "
             f"parsed, each text written on as evacore's `delta` event), per token ({paced})"),
        _row("parsing_floor_body_instructions_k", _k(m["parsing_floor_body"]), "k",
             "its httptools body callback per call: the same measure as evacore's fast lane "
             "row, for the least a relay keeping evacore's stream contract does"),
        _row("fast_lane_over_parsing_floor_body",
             _over(m["fast_lane"], m["parsing_floor_body"], 2), "x",
             "evacore's fast lane over the parsing relay's body callback, per token"),
        _row("fast_lane_read_instructions_k", _k(m["fast_lane_read"]), "k",
             f"uvloop's read callback per call in evacore, {paced}: a token's whole way from "
             "the socket's read to the client's write (the fast lane and the HTTP parse "
             "around it)"),
        _row("parsing_floor_read_instructions_k", _k(m["parsing_floor_read"]), "k",
             "the same callback in the parsing relay, same stream"),
        _row("long_tour_instructions_m", round(m["long_tour"] / 1e6, 2), "M",
             f"a one-token tour on a chat of {m['long_messages']} stored messages"),
        _row("instructions_per_stored_message_k", _k(per_message), "k",
             f"(the long chat's tour - the fresh chat's) / the messages it holds more "
             f"(at most {fresh_messages} in the fresh chats)"),
    ]


def explain(rows: list[dict[str, Any]]) -> str:
    v = {r["metric"]: r["value"] for r in rows}
    if not isinstance(v.get("tour_instructions_m"), int | float):
        return ""
    return (f"A one-token tour costs {v['tour_instructions_m']:g} M instructions of evacore's "
            f"process ({v.get('facade_tour_instructions_m')} M through the OpenAI-compatible "
            f"facade), and a paced token's fast lane (the read's callback, from the upstream's "
            f"chunk to the client's write) {v['fast_lane_instructions_k']} k; the bare relay "
            f"spends "
            f"{v['floor_token_instructions_k']} k a token on the same stream, and a relay "
            f"that parses each event and writes evacore's `delta` event, with nothing else, "
            f"{v.get('parsing_floor_body_instructions_k')} k in the same callback "
            f"({v.get('fast_lane_over_parsing_floor_body')}x). A stored "
            f"message adds {v['instructions_per_stored_message_k']} k to every tour of its "
            "chat (its history read, prompt element, token count, fit and the request's "
            "JSON). These counts move only when the code does: compare them across commits "
            "when the timings of the shared machine disagree.")
