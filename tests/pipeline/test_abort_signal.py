"""A tour's abort signal: fired once, with the first reason kept; what waits on it wakes
whether it began waiting before the abort or after."""

from __future__ import annotations

import asyncio

from evacore.pipeline.tour import AbortSignal


async def test_a_waiter_wakes_when_the_signal_fires() -> None:
    signal = AbortSignal()
    waiter = asyncio.ensure_future(signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done() and not signal.is_set()
    signal.fire("client disconnected")
    await asyncio.wait_for(waiter, 1)
    assert signal.is_set() and signal.fired and signal.reason == "client disconnected"


async def test_a_signal_fired_before_anyone_waits_is_seen_at_once() -> None:
    signal = AbortSignal()
    signal.fire("shutdown")
    signal.fire("a later reason")  # fired once: the first reason stays
    assert signal.reason == "shutdown"
    assert signal.event.is_set()  # the plain event a tool waits on, asked for afterwards
    await asyncio.wait_for(signal.wait(), 1)


async def test_the_plain_event_and_the_signal_are_one() -> None:
    signal = AbortSignal()
    event = signal.event
    assert signal.event is event and not event.is_set()
    signal.fire()
    assert event.is_set() and signal.reason == "aborted"
