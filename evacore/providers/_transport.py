"""Request discipline for the HTTP adapters (R2.11): deadlines (connect, first token, idle,
total), retries with backoff only before the first token, error mapping with the
connection's secrets redacted (`evacore.redact`), and closing the upstream response at once
when the consumer goes away.

Must not: know any vendor's request body or event format.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import orjson
import structlog

from evacore.errors import (
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
)
from evacore.providers._fast_lane import FastLane
from evacore.providers._sse import SSEDecoder, SSEEvent
from evacore.providers.base import Connection, Timeouts
from evacore.redact import redact

T = TypeVar("T")
log = structlog.get_logger(__name__)

_BACKOFF_CEILING = 8.0


def label(conn: Connection) -> str:
    return f"{conn.kind} connection {conn.name!r}"


class Deadlines:
    """The clock of one provider request: total over all attempts, first token per attempt,
    idle per read once a token arrived. Non-stream requests only know connect and total.

    Reads are guarded by one lazy timer per request (a read only moves a number; the
    timer re-arms itself when it fires early), which keeps the per-chunk cost tiny.
    """

    def __init__(self, timeouts: Timeouts, *, streaming: bool = True) -> None:
        self.timeouts = timeouts
        self.streaming = streaming
        now = time.monotonic()
        self._total_at = now + timeouts.total
        self._first_at = now + timeouts.first_token
        self.first_token_seen = False
        self.expired: str | None = None
        self._guard_until = math.inf
        self._guard_which = ""
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._armed_at = 0.0
        self.token_at = 0.0
        """When the fast lane last took a token (`time.monotonic()`; 0.0: never): the guard
        armed before it runs to the idle deadline from it instead, as a new read's would."""

    def arm(self, until: float, which: str, task: asyncio.Task[Any] | None = None) -> None:
        self._guard_until, self._guard_which = until, which
        self._armed_at = time.monotonic()
        self._task = task or asyncio.current_task()
        if self._timer is None or self._timer_at > until:
            if self._timer is not None:
                self._timer.cancel()
            self._schedule(until)

    def disarm(self) -> None:
        self._guard_until = math.inf

    def _schedule(self, until: float) -> None:
        delay = max(0.0, until - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)
        self._timer_at = until

    def _fire(self) -> None:
        self._timer = None
        until, which = self._guard_until, self._guard_which
        if until == math.inf or self._task is None:
            return
        if self.token_at > self._armed_at:  # the lane took a token while the read waited
            until = self.token_at + self.timeouts.idle
            which = "idle"
            if self._total_at <= until:
                until, which = self._total_at, "total"
        if time.monotonic() < until:
            self._schedule(until)
            return
        self.expired = which
        self._task.cancel()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def start_attempt(self) -> None:
        self._first_at = time.monotonic() + self.timeouts.first_token

    def mark_token(self) -> None:
        self.first_token_seen = True

    def remaining_total(self) -> float:
        return self._total_at - time.monotonic()

    def next_wait(self) -> tuple[float, str]:
        now = time.monotonic()
        if not self.streaming:
            return self._total_at - now, "total"
        if self.first_token_seen:
            until, which = now + self.timeouts.idle, "idle"
        else:
            until, which = self._first_at, "first_token"
        if self._total_at <= until:
            return self._total_at - now, "total"
        return until - now, which


def timeout_error(conn: Connection, which: str) -> ProviderTimeout:
    t = conn.timeouts
    text = {
        "connect": f"could not connect within {t.connect:g}s",
        "first_token": f"no first token within {t.first_token:g}s",
        "idle": f"no data for {t.idle:g}s in the middle of the answer",
        "total": f"the request took longer than {t.total:g}s",
    }[which]
    return ProviderTimeout(f"{label(conn)}: {text}", which=which, retryable=which == "connect")


async def within(aw: Awaitable[T], dl: Deadlines, conn: Connection) -> T:
    """Await under the deadline that applies now; on expiry raise ProviderTimeout(which)."""
    wait, which = dl.next_wait()
    if wait <= 0:
        if asyncio.iscoroutine(aw):
            aw.close()
        raise timeout_error(conn, which)
    task = asyncio.current_task()
    cancelling = task.cancelling() if task is not None else 0
    dl.expired = None
    dl.arm(time.monotonic() + wait, which, task)
    try:
        return await aw
    except asyncio.CancelledError:
        if dl.expired is not None and task is not None and task.uncancel() <= cancelling:
            raise timeout_error(conn, dl.expired) from None
        raise
    finally:
        dl.disarm()


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def upstream_message(raw: bytes) -> str:
    """The human part of an upstream error body (OpenAI, Anthropic, KoboldCpp, FastAPI shapes)."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace").strip()[:500]
    for key in ("error", "detail", "message"):
        value = body.get(key) if isinstance(body, dict) else None
        if isinstance(value, str) and value:
            return value[:500]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict):
            for inner in ("message", "msg", "detail"):
                if isinstance(value.get(inner), str) and value[inner]:
                    return str(value[inner])[:500]
    return raw.decode("utf-8", "replace").strip()[:500]


def is_retryable_status(status: int) -> bool:
    return status in (408, 425, 429) or status >= 500


def http_error(
    conn: Connection, status: int, message: str, headers: Mapping[str, str] | None = None
) -> ProviderHTTPError:
    clean = redact(message) or "(no message)"
    details: dict[str, Any] = {"upstream_status": status, "upstream_message": clean}
    retry_after = retry_after_seconds(headers or {})
    if retry_after is not None:
        details["retry_after"] = retry_after
    err = ProviderHTTPError(
        f"{label(conn)}: upstream answered HTTP {status}: {clean}",
        retryable=is_retryable_status(status),
        **details,
    )
    err.upstream_status = status  # type: ignore[attr-defined]
    return err


class Body(Protocol):
    """A response body read chunk by chunk: b"" at its end."""

    async def read(self) -> bytes: ...


async def sse_events(response: Body, dl: Deadlines, conn: Connection,
                     lane: FastLane | None = None, take: Callable[[bytes], bool] | None = None
                     ) -> AsyncIterator[SSEEvent]:
    """SSE events of a streaming response, each read under the deadline that applies.

    The hot path of a relayed answer: one read per network chunk, guarded inline (what
    `within` does, without a coroutine per read). With a `lane`, chunks of plain text
    deltas that arrive while this waits for a read go to its tap `take` instead
    (`_fast_lane.py`: the lane's `reader()`, which may already have taken the chunks that
    came with the response's head, `open_stream`'s `early`).
    """
    if lane is not None:  # the decoders its tap checks, and may have left untouched
        decoder, utf8 = lane.decoder, lane.utf8
    else:
        decoder, utf8 = SSEDecoder(), codecs.getincrementaldecoder("utf-8")(errors="replace")
    read = response.read
    tap_body = getattr(response, "tap_body", None) if take is not None else None
    if tap_body is not None:
        tap_body(take)
    task = asyncio.current_task()
    try:
        while True:
            wait, which = dl.next_wait()
            if wait <= 0:
                raise timeout_error(conn, which)
            cancelling = task.cancelling() if task is not None else 0
            dl.expired = None
            dl.arm(time.monotonic() + wait, which, task)
            try:
                chunk = await read()
            except asyncio.CancelledError:
                if dl.expired is not None and task is not None and task.uncancel() <= cancelling:
                    raise timeout_error(conn, dl.expired) from None
                raise
            finally:
                dl.disarm()
            if not chunk:
                break
            if utf8.buffer:  # the start of a character split over two reads waits there
                text = utf8.decode(chunk)
            else:
                try:
                    text = chunk.decode()  # the usual chunk: whole characters
                except UnicodeDecodeError:
                    text = utf8.decode(chunk)  # split or invalid bytes: the decoder's rules
            for event in decoder.feed(text):
                yield event
        for event in decoder.feed(utf8.decode(b"", final=True)):
            yield event
        for event in decoder.flush():
            yield event
    finally:
        if tap_body is not None:
            tap_body(None)


async def drain(rest: AsyncIterator[object], limit: float = 0.1) -> None:
    """Read what follows the end of an answer (`[DONE]`, the chunk terminator) so the
    keep-alive connection goes back to the pool; give up quickly and let it close."""
    try:
        async with asyncio.timeout(limit):
            async for _ in rest:
                pass
    except (TimeoutError, ProviderError):
        pass


def retry_delay(conn: Connection, err: ProviderError, tries: int) -> float:
    delay = conn.retry_backoff * (2**tries) * (1 + random.random() * 0.25)
    delay = min(delay, _BACKOFF_CEILING)
    retry_after = err.details.get("retry_after")
    if isinstance(retry_after, int | float):
        delay = max(delay, min(float(retry_after), conn.retry_after_cap))
    return delay


async def retrying(
    conn: Connection, dl: Deadlines, attempt: Callable[[], AsyncIterator[T]]
) -> AsyncIterator[T]:
    """Run `attempt` until it succeeds; retry a retryable ProviderError only while nothing
    has been yielded yet (before the first token), at most `conn.retries` times."""
    tries = 0
    while True:
        dl.start_attempt()
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    dl.mark_token()
                    yield item
            return
        except ProviderError as err:
            if dl.first_token_seen or not err.retryable or tries >= conn.retries:
                raise
            delay = retry_delay(conn, err, tries)
            if delay >= dl.remaining_total():
                raise
            log.warning(
                "provider.retry", kind=conn.kind, connection=conn.name, attempt=tries + 1,
                delay=round(delay, 3), error=err.code,
                status=err.details.get("upstream_status"),
            )
            await asyncio.sleep(delay)
            tries += 1
        finally:
            dl.close()
