"""Stage 12, streaming response: relay the provider's events to the client as they come.

Must not: judge answers (stream rules do, in the agent loop) or run tools. While a text
rule is armed the loop sets `holding`, and deltas are kept back instead of sent (R6.7).
The prefill goes in front of the client's first delta exactly once (R2.12).
Must not outrun the client either: once `limits.event_queue_bytes` of events wait unread,
the stage waits for the channel before it reads the provider's stream on, so a slow reader
slows the upstream (TCP back-pressure) instead of filling memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from evacore.pipeline.events import JOIN_AT
from evacore.providers.base import Finish, ReasoningDelta, TextDelta, TextTap, ToolCall

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Step, Tour

YIELD_AFTER = 0.0005
"""Once sent deltas have waited this many seconds unread, the stage lets other tasks run
(the channel writes what is queued): a burst read from the socket buffer does not keep the
channel waiting until its end. A token that arrives alone costs nothing extra: the stage
waits for the provider's next read anyway, and the channel runs then."""
ALONE_AFTER = 0.0005
"""A delta that follows the previous one by at least this many seconds came alone (a model
streaming at its pace): it is written to the client through the channel's writer from the
tour's own task (`EventSink.relay`), which spares the channel's task a wake-up per token.
Deltas closer together are a burst and are batched into one write."""


class Streaming:
    number = 12
    name = "streaming"

    async def run(self, core: Core, tour: Tour) -> None:
        step: Step = tour.data["step"]
        holding: bool = tour.data.get("holding", False)
        stream_hooks = core.plugins.stream_hooks(tour)
        parts: list[str] = []
        tour.data["partial"] = parts
        tour.data["partial_tokens"] = False  # a prefill alone is no partial answer
        sent = tour.data.get("prefill_sent")
        stored_prefix = tour.data.get("prefill", "") if not sent else ""
        prefix = tour.data.get("prefill_client", stored_prefix) if not sent else ""
        if stored_prefix:
            parts.append(stored_prefix)
        reasoning: list[str] = []
        seam = "continue_postfix" in tour.data
        events = tour.data.pop("events_iter")
        sink = tour.events
        sink.max_bytes = core.settings.limits.event_queue_bytes
        first = "first_token_ms" not in tour.diagnostics
        last_at = 0.0
        tap: TextTap | None = tour.data.pop("tap", None)
        if tap is not None and (stream_hooks is not None or holding):
            tap = None  # every text goes through the hooks, or is held back

        taken = 0
        abort = tour.abort

        def first_out(now: float) -> None:
            """The first token the client gets, timed from the request."""
            nonlocal first
            first = False
            tour.diagnostics["first_token_ms"] = round((now - tour.started) * 1000, 3)

        def first_from_read() -> None:
            """The answer's first text went out from the network read."""
            tour.data["partial_tokens"] = tour.data["prefill_sent"] = True
            first_out(time.perf_counter())

        def take(texts: list[str]) -> bool:
            """The fast lane: texts from the network read, written at once or queued for
            the channel's task (this tour's task is not woken for them), or refused."""
            nonlocal taken
            if abort.fired:
                return False
            batch = ([("delta", {"text": texts[0]})] if len(texts) == 1
                     else [("delta", {"text": text}) for text in texts])
            if not (sink.write_now(batch) or sink.queue_now(batch)):
                return False
            parts.extend(texts)
            if len(parts) >= JOIN_AT:
                parts[:] = ["".join(parts)]
            taken += len(texts)
            if first:
                first_from_read()
            return True

        lane_before = sink.lane_texts
        lane_text = sink.text_lane(parts, abort)  # one text written at once, or refused

        def first_text(text: str) -> bool:
            """`lane_text` for the answer's first text, which it also times; the next
            texts take `lane_text` itself."""
            if not lane_text(text):
                return False
            if first:
                first_from_read()
            if tap is not None and tap.take_text is not None:
                tap.take_text = lane_text
            return True

        def arm(offered: TextTap) -> None:
            offered.take = take
            offered.take_text = first_text if first else lane_text

        if tap is not None and not prefix and not seam:
            # nothing goes in front of the first text: it may take the lane too, which
            # spares the tour's task a wake-up before the client's first token
            arm(tap)

        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    if isinstance(event, TextDelta):
                        text = event.text
                        if stream_hooks is not None:
                            text = await stream_hooks.feed(text)
                        if not text:
                            continue
                        if seam:  # the first text of a continue whose text got a postfix
                            seam = False
                            prefix = _drop_postfix(tour, parts, prefix, text)
                        parts.append(text)
                        if len(parts) >= JOIN_AT:
                            parts[:] = ["".join(parts)]
                        tour.data["partial_tokens"] = True
                        if not holding:
                            if prefix and not tour.data.get("prefill_sent"):
                                text = prefix + text
                            tour.data["prefill_sent"] = True
                            now = time.perf_counter()
                            if now - last_at >= ALONE_AFTER:
                                # a token that came alone: to the client from this task at once
                                written = await sink.relay("delta", {"text": text})
                            else:
                                sink.emit("delta", {"text": text})  # a burst: batched
                                written = False
                            if not written:
                                if sink.full:
                                    await sink.room()  # the client reads slower than the provider
                                if first or (sink.read and now - sink.pending_since >= YIELD_AFTER):
                                    await asyncio.sleep(0)  # the channel writes what is queued
                            last_at = now
                            if first:
                                first_out(now)
                            if written and tap is not None and tap.take is None:
                                arm(tap)  # the next plain texts may skip this task
                    elif isinstance(event, ToolCall):
                        call = {"id": event.id, "name": event.name, "arguments": event.arguments}
                        step.tool_calls.append(call)
                        if not holding:
                            sink.emit("tool_call", dict(call))
                    elif isinstance(event, ReasoningDelta):
                        reasoning.append(event.text)
                    elif isinstance(event, Finish):
                        step.finish_reason = event.finish_reason
                        if event.usage is not None:
                            step.usage = {
                                "prompt_tokens": event.usage.prompt_tokens,
                                "completion_tokens": event.usage.completion_tokens,
                                "total_tokens": event.usage.total_tokens,
                            }
                        if event.model:
                            tour.data["model"] = event.model
        finally:
            if tap is not None:
                tap.take = tap.take_text = None
            taken += sink.lane_texts - lane_before
            if taken:  # deltas that went out from the network read (diagnostics)
                tour.diagnostics["fast_lane_deltas"] = (
                    tour.diagnostics.get("fast_lane_deltas", 0) + taken)
        if stream_hooks is not None:
            from evacore.plugins.host import note_records

            note_records(tour, "stream", stream_hooks.finish())
        if prefix and not holding and not tour.data.get("prefill_sent"):
            tour.data["prefill_sent"] = True
            tour.events.emit("delta", {"text": prefix})
        step.text = "".join(parts)
        if reasoning:
            step.reasoning = "".join(reasoning)  # type: ignore[attr-defined]


def _drop_postfix(tour: Tour, parts: list[str], prefix: str, text: str) -> str:
    """A continued text got SillyTavern's whitespace postfix; a continuation that opens
    with whitespace of its own replaces it (never two spaces at the seam). Returns the
    prefix the client still has to get."""
    postfix = tour.data.pop("continue_postfix")
    if not text[:1].isspace() or not parts or not parts[0].endswith(postfix):
        return prefix
    parts[0] = parts[0][: -len(postfix)]
    tour.data["prefill"] = parts[0]
    client = tour.data.get("prefill_client", "")
    if client.startswith(postfix):
        tour.data["prefill_client"] = client[len(postfix):]
    return prefix.removeprefix(postfix)
