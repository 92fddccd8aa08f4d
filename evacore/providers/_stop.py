"""Client-side stop strings: cut the answer at the first stop string even when the backend
ignores or truncates the `stop` list, and end the stream there (the upstream is closed).

Must not: change anything but text deltas; tool calls pass through untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing

from evacore.providers.base import (
    Answer,
    Finish,
    ProviderEvent,
    ReasoningDelta,
    TextDelta,
)


class StopScanner:
    """Holds back only the tail that could still become a stop string."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._hold = max((len(s) for s in self.stops), default=1) - 1
        self._buf = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit, whether a stop string was hit)."""
        buf = self._buf + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self._buf = ""
            return buf[: min(hits)], True
        keep = 0
        for k in range(min(self._hold, len(buf)), 0, -1):
            tail = buf[-k:]
            if any(s.startswith(tail) for s in self.stops):
                keep = k
                break
        self._buf = buf[len(buf) - keep :]
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        rest, self._buf = self._buf, ""
        return rest


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[: min(hits)], True) if hits else (text, False)


def cut_answer(answer: Answer, stops: Sequence[str]) -> Answer:
    text, hit = cut_at_stop(answer.text, stops)
    if hit:
        answer.text = text
        answer.finish_reason = "stop"
    return answer


async def apply_stop(
    events: AsyncIterator[ProviderEvent], stops: Sequence[str]
) -> AsyncIterator[ProviderEvent]:
    """Pass events through; on a stop string emit the text before it, then Finish("stop")."""
    scanner = StopScanner(stops)
    async with aclosing(events) as upstream:
        async for event in upstream:
            if isinstance(event, TextDelta):
                text, hit = scanner.feed(event.text)
                if text:
                    yield TextDelta(text)
                if hit:
                    yield Finish("stop")
                    return
                continue
            if isinstance(event, ReasoningDelta):
                yield event
                continue
            rest = scanner.flush()
            if rest:
                yield TextDelta(rest)
            yield event
