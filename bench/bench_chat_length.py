"""What a tour costs as its chat grows: evacore's CPU for a one-token tour on a fresh chat and
on a chat of several hundred stored messages, side by side in one run against the same fast
fake upstream (every tour reads as much history as the context could hold, and builds,
counts and fits it into the prompt); and what a tour's stored record grows by with its chat,
on a chat of long messages (its provider request repeats the whole chat, its long messages
are stored once and named, `store/request_parts.py`).

Must not: bind anything but loopback or download anything; the server runs on a fresh SQLite
data folder that is removed afterwards.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _relay_procs as procs

TOKEN = "bench-master-token-0123456789abcdef"
CONTEXT_SIZE = 16384
"""A common context size: with short messages, a long chat's whole history fits it."""
LONG_CHAT_TOURS, QUICK_LONG_CHAT_TOURS = 150, 15
"""Tours that fill the long chat (two stored messages each)."""
ROUNDS, QUICK_ROUNDS = 8, 2
"""Measured rounds; each is one tour on the fresh chat and one on the long chat."""
MESSAGE = "Hello there, how are you today? Tell me about your morning."
WORDY_TOURS, QUICK_WORDY_TOURS = 40, 6
"""Tours on the chat of long messages, each one message of `WORDY` characters."""
WORDY = 800


def _row(metric: str, value: float | None, unit: str, note: str) -> dict[str, Any]:
    return {"metric": metric, "value": value, "unit": unit, "target": None, "met": None,
            "note": note}


class _Chats:
    def __init__(self, url: str, upstream: str, *, max_tokens: int = 2,
                 name: str = "bench-chat-length") -> None:
        self.http = httpx.Client(base_url=url + "/v1", timeout=120,
                                 headers={"Authorization": f"Bearer {TOKEN}"})
        r = self.http.post("/connections", json={
            "name": name, "kind": "openai-chat", "base_url": upstream,
            "model": "bench-model", "max_tokens": max_tokens, "context_size": CONTEXT_SIZE})
        r.raise_for_status()
        self.connection = str(r.json()["id"])

    def new(self) -> str:
        r = self.http.post("/chats", json={"connection_id": self.connection, "title": "bench"})
        r.raise_for_status()
        return str(r.json()["id"])

    def tour(self, chat_id: str) -> None:
        r = self.http.post(f"/chats/{chat_id}/generate",
                           json={"message": {"content": MESSAGE}, "stream": True})
        r.raise_for_status()

    def messages(self, chat_id: str) -> int:
        r = self.http.get(f"/chats/{chat_id}/messages", params={"limit": 1000})
        r.raise_for_status()
        return len(r.json()["messages"])


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Fill one chat, then alternate one-token tours on a fresh chat and on the filled one,
    reading evacore's CPU (scheduler nanoseconds, all threads) around each tour."""
    fill = QUICK_LONG_CHAT_TOURS if quick else LONG_CHAT_TOURS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    server_prefix, load_prefix, _ = procs.pinning()
    with tempfile.TemporaryDirectory(prefix="evacore-bench-chat-length-") as tmp:
        folder = Path(tmp)
        up, upstream = procs.upstream(load_prefix, folder, 1, 0)
        server, url = procs.server(server_prefix, folder, TOKEN)
        try:
            chats = _Chats(url, upstream)
            fresh, long_ = chats.new(), chats.new()
            for _ in range(fill):
                chats.tour(long_)
            chats.tour(fresh)  # both chats have been answered once before the rounds
            costs: dict[str, list[float]] = {"fresh": [], "long": []}
            for _ in range(rounds):
                for name, chat in (("fresh", fresh), ("long", long_)):
                    mark = procs.CpuMark(server.pid)
                    chats.tour(chat)
                    costs[name].append(mark.since()[0] / 1e6)
            stored = chats.messages(long_)
            records = _wordy_records(chats, folder, QUICK_WORDY_TOURS if quick else WORDY_TOURS)
            chats.http.close()
        except Exception as exc:
            raise RuntimeError(f"chat length bench failed: {exc}\n{server.tail()}") from exc
        finally:
            server.stop()
            up.stop()
    fresh_ms, long_ms = statistics.median(costs["fresh"]), statistics.median(costs["long"])
    how = (f"median of {rounds} one-token tours, alternating with the other chat; evacore's "
           f"CPU, all threads; context size {CONTEXT_SIZE}")
    return [
        _row("tour_cpu_ms_fresh_chat", round(fresh_ms, 2), "ms",
             f"a chat with at most {2 * (rounds + 1)} messages; {how}"),
        _row("tour_cpu_ms_long_chat", round(long_ms, 2), "ms",
             f"a chat of {stored} stored messages at the end; {how}"),
        _row("long_over_fresh_chat", round(long_ms / fresh_ms, 2) if fresh_ms else None, "x",
             "the long chat's tour over the fresh chat's, same run"),
        _row("tour_cpu_us_per_stored_message",
             round((long_ms - fresh_ms) * 1000 / max(1, stored - 2 * rounds), 1), "µs",
             "(long chat's tour - fresh chat's tour) / the messages the long chat holds more"),
        *_record_rows(*records),
    ]


def _wordy_records(chats: _Chats, folder: Path, tours: int) -> tuple[int, int, int]:
    """Fill a chat with `tours` tours of long messages; (its first tour's stored record bytes,
    its last's, the messages the last tour's request held more), read from the database."""
    chat = chats.new()
    for i in range(tours):
        text = (f"{i}: " + "Tell me about the lighthouse and the keeper who lived there. " * 14)
        r = chats.http.post(f"/chats/{chat}/generate",
                            json={"message": {"content": text[:WORDY]}, "stream": True})
        r.raise_for_status()
    db = sqlite3.connect(f"file:{folder / 'data' / 'evacore.db'}?mode=ro", uri=True)
    try:
        sizes = [n for (n,) in db.execute(
            "SELECT length(diagnostics) FROM tours WHERE chat_id = ? ORDER BY created_at, id",
            (chat,))]
    finally:
        db.close()
    return sizes[0], sizes[-1], 2 * (len(sizes) - 1)


def _record_rows(first: int, last: int, more: int) -> list[dict[str, Any]]:
    how = f"a chat of {WORDY}-character messages, one-token answers"
    return [
        _row("record_kb_wordy_chat_last_tour", round(last / 1024, 1), "KB",
             f"the stored record (diagnostics) of the last tour of {more // 2 + 1} on {how}"),
        _row("record_bytes_per_stored_message", round((last - first) / max(1, more)), "bytes",
             f"(last tour's record - first tour's) / the messages the last tour's chat held "
             f"more, on {how}: what each earlier message adds to every later record (a "
             f"{WORDY}-character message repeated whole would add more than {WORDY})"),
    ]
