"""The relay benchmark's load client: N keep-alive HTTP/1.1 streams on raw asyncio protocols
(uvloop when installed), timing the first token, the last token and the end of each streamed
answer.

Must not: parse JSON or SSE beyond counting a marker per chunk: the client must stay cheap
enough that the server under test, not the client, is what is measured. Loopback only.

    python bench/_relay_client.py '<json plan>'   # one JSON result: to plan["out"] or stdout
Plan: {"host", "port", "requests": [raw request bytes as latin-1 str, one per stream],
"marker", "error_marker", "concurrency", "count" (total requests) or "seconds", "grace"
(seconds in-flight streams may take after "seconds" before they are cut and counted as
unfinished), "per_stream" (optional, default 1: stream i takes requests i*k .. i*k+k-1 in
turn, e.g. two alternating messages of one conversation)}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class _Stream(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time; chunked or sized bodies."""

    def __init__(self, marker: bytes, error_marker: bytes | None) -> None:
        self.marker, self.error_marker = marker, error_marker
        self.buf = bytearray()
        self.state = "head"
        self.remaining = 0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self.first: float | None = None
        self.last: float | None = None
        self.tokens = 0
        self.status = 0
        self.failed = False
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionError("connection closed")
        if self.done is not None and not self.done.done():
            self.done.set_exception(self.lost)

    def send(self, request: bytes) -> asyncio.Future[None]:
        assert self.transport is not None
        self.done = asyncio.get_running_loop().create_future()
        self.first, self.last = None, None
        self.tokens, self.status, self.failed = 0, 0, False
        self.state = "head"
        self.transport.write(request)
        return self.done

    def data_received(self, data: bytes) -> None:
        self.buf += data
        buf = self.buf
        while True:
            if self.state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(buf[:end]).lower()
                del buf[: end + 4]
                self.status = int(head[9:12])
                if b"transfer-encoding: chunked" in head:
                    self.state = "size"
                else:
                    at = head.find(b"content-length:")
                    self.remaining = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
                    self.state = "body"
            elif self.state == "size":
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                del buf[: end + 2]
                if size:
                    self.remaining, self.state = size, "chunk"
                else:
                    self.state = "trailer"
            elif self.state == "chunk":
                if len(buf) < self.remaining + 2:
                    return
                self._seen(bytes(buf[: self.remaining]))
                del buf[: self.remaining + 2]
                self.state = "size"
            elif self.state == "trailer":
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                del buf[: end + 2]
                if end == 0:
                    self._finish()
                    return
            else:  # sized body
                if len(buf) < self.remaining:
                    return
                self._seen(bytes(buf[: self.remaining]))
                del buf[: self.remaining]
                self._finish()
                return

    def _seen(self, data: bytes) -> None:
        count = data.count(self.marker)
        if count:
            self.last = time.perf_counter()
            if self.first is None:
                self.first = self.last
            self.tokens += count
        if self.error_marker is not None and self.error_marker in data:
            self.failed = True

    def _finish(self) -> None:
        self.state = "idle"
        if self.done is not None and not self.done.done():
            self.done.set_result(None)


async def run_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Drive the plan; returns per-request samples (ttft, total seconds) and counts."""
    host, port = plan["host"], int(plan["port"])
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"the load client talks to loopback only, not {host!r}")
    requests = [r.encode("latin-1") for r in plan["requests"]]
    marker = plan["marker"].encode()
    error_marker = plan["error_marker"].encode() if plan.get("error_marker") else None
    concurrency = int(plan["concurrency"])
    per_stream = max(1, int(plan.get("per_stream") or 1))
    count = plan.get("count")
    left = [int(count)] if count is not None else None
    seconds = float(plan.get("seconds") or 0)
    grace = float(plan.get("grace") or 10)
    loop = asyncio.get_running_loop()
    ttft: list[float] = []
    total: list[float] = []
    tail: list[float] = []
    tokens = [0]
    unfinished = [0]
    errors: list[str] = []
    started = time.perf_counter()
    deadline = started + seconds

    def more() -> bool:
        if left is not None:
            if left[0] <= 0:
                return False
            left[0] -= 1
            return True
        return time.perf_counter() < deadline

    async def worker(index: int) -> None:
        mine = [requests[(index * per_stream + j) % len(requests)] for j in range(per_stream)]
        proto: _Stream | None = None
        in_flight = False
        turn = 0
        try:
            while more():
                request = mine[turn % per_stream]
                turn += 1
                try:
                    if proto is None or proto.lost is not None:
                        _, proto = await loop.create_connection(
                            lambda: _Stream(marker, error_marker), host, port)
                    t0 = time.perf_counter()
                    in_flight = True
                    await proto.send(request)
                    in_flight = False
                    end = time.perf_counter()
                except (OSError, ConnectionError) as exc:
                    in_flight = False
                    errors.append(f"{type(exc).__name__}: {exc}")
                    proto = None
                    await asyncio.sleep(0.01)
                    continue
                tokens[0] += proto.tokens
                if proto.status != 200 or proto.failed or proto.tokens == 0:
                    errors.append(f"status {proto.status}, error event {proto.failed}, "
                                  f"{proto.tokens} tokens")
                    continue
                ttft.append((proto.first or end) - t0)
                total.append(end - t0)
                tail.append(end - (proto.last or end))
        except asyncio.CancelledError:
            if in_flight and proto is not None:
                unfinished[0] += 1
                tokens[0] += proto.tokens
        finally:
            if proto is not None and proto.transport is not None:
                proto.transport.close()

    tasks = [asyncio.ensure_future(worker(i)) for i in range(concurrency)]
    _, pending = await asyncio.wait(tasks, timeout=seconds + grace if seconds else None)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    elapsed = time.perf_counter() - started
    return {"ttft": ttft, "total": total, "tail": tail, "tokens": tokens[0], "errors": len(errors),
            "error_samples": errors[:5], "unfinished": unfinished[0], "elapsed": elapsed,
            "completed": len(total)}


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main() -> None:
    plan = json.loads(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else sys.stdin.read())
    loop = _new_loop()
    try:
        result = loop.run_until_complete(run_plan(plan))
    finally:
        loop.close()
    out = plan.get("out")
    if out:  # a file: an event loop may leave a pipe non-blocking and cut a long write
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)
    else:
        os.set_blocking(sys.stdout.fileno(), True)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
