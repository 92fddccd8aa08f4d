"""A tour: one generation run, its fixed environment, abort signal, seed, timings and results.

Must not: run stages (runner.py does) or touch storage; it is the state stages share.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from evacore.domain.ids import new_id
from evacore.macros.env import LazyRandom
from evacore.pipeline.events import EventSink
from evacore.prompt.elements import Prompt

MODES = ("normal", "regenerate", "swipe", "continue", "impersonate", "quiet")


class AbortSignal:
    """Fired once, by an explicit abort, a client disconnect, shutdown or a timeout (R2.11).
    Its `asyncio.Event` is made when something first waits for it (a tool call): most tours
    only read `fired`."""

    __slots__ = ("_event", "fired", "reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self.reason: str | None = None
        self.fired = False
        """`fire` was called: what `is_set()` says, read without a call (the fast lane)."""

    def fire(self, reason: str = "aborted") -> None:
        if not self.fired:
            self.reason = reason
            self.fired = True
            if self._event is not None:
                self._event.set()

    def is_set(self) -> bool:
        return self.fired

    @property
    def event(self) -> asyncio.Event:
        """The underlying event, for code that wants a plain `asyncio.Event` (set already
        when the signal fired before it was asked for)."""
        if self._event is None:
            self._event = asyncio.Event()
            if self.fired:
                self._event.set()
        return self._event

    async def wait(self) -> None:
        await self.event.wait()


@dataclass
class Step:
    """One provider request inside the tour and the answer it produced."""

    index: int
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    discarded: bool = False

    def stored(self) -> dict[str, Any]:
        """The shape stored with the variant and returned by the API (R12.3)."""
        return {
            "text": self.text,
            "tool_calls": self.tool_calls,
            "results": self.results,
            "finish_reason": self.finish_reason,
        }


_ASSEMBLY_ONLY = ("history_batch", "token_counts", "input_expanded", "sysprompt")
"""Read by stages 1-9 only (`Tour.assembled`)."""


@dataclass
class Tour:
    chat_id: str
    user_id: str | None
    role: str
    mode: str = "normal"
    stream: bool = True
    env: dict[str, bool] = field(default_factory=dict)
    env_overrides: dict[str, bool] | None = None
    input_text: str = ""
    input_images: list[Any] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    """Per-request generation parameters (sampler settings, prefill override, …)."""
    client_ops: list[dict[str, Any]] = field(default_factory=list)
    external_tools: list[dict[str, Any]] = field(default_factory=list)
    """Tools the client runs itself, as OpenAI function tools (never executed here)."""
    id: str = field(default_factory=new_id)
    seed: int = field(default_factory=lambda: int.from_bytes(os.urandom(4), "big"))
    """32 random bits from the system (no generator made for them)."""
    abort: AbortSignal = field(default_factory=AbortSignal)
    events: EventSink = field(default_factory=EventSink)
    prompt: Prompt = field(default_factory=Prompt)
    timings: dict[str, float] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    """What stages load and hand on (chat, connection, character, persona, history…)."""
    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    status: str = "running"
    error: dict[str, Any] | None = None
    started: float = field(default_factory=time.perf_counter)
    answered: bool = False
    """The answer is complete (the provider finished and every step ran): only its end and
    save (stages 13-14) are left, which an abort no longer cuts short."""
    save_hooks: list[Callable[[Any, Tour], Awaitable[None]]] = field(default_factory=list)
    """A channel's writes for this tour's save transaction (stage 14): each awaited as
    `(session, tour)` after the core's own save hooks, in the same transaction."""

    @property
    def rng(self) -> LazyRandom:
        """The tour's own random source (seeded, recorded): draws are reproducible. Its
        generator is made at the first draw (most tours draw nothing)."""
        rng = self.data.get("_rng")
        if rng is None:
            rng = self.data["_rng"] = LazyRandom(functools.partial(random.Random, self.seed))
        return rng

    def assembled(self) -> None:
        """Stages 1-9 are done: let go of what only they read (the history as read from
        the store, the prompt's elements, the per-text token counts, the expanded input and
        the system prompt preset) before the answer streams. What the steps send is in
        `data["messages"]`; the elements and the stored rows they came from are a second
        and third copy of every message, held for as long as the answer streams by every
        tour in flight."""
        self.prompt = Prompt()
        for key in _ASSEMBLY_ONLY:
            self.data.pop(key, None)

    def flags(self) -> frozenset[str]:
        return frozenset(k for k, v in self.env.items() if v)

    def add_time(self, name: str, seconds: float) -> None:
        """Count `seconds` toward the timing of `name` (ms, summed over its runs)."""
        self.timings[name] = round(self.timings.get(name, 0.0) + seconds * 1000, 3)
