"""Stream hooks (stage 13, per delta): contract, and a slow hook never stalls another tour."""

from __future__ import annotations

import asyncio
import time

from tests.plugins.conftest import Loader, tour

STREAMERS = """
    import asyncio
    from evacore.plugins import Plugin
    plugin = Plugin(name="streamers", version="1")
    seen = {}

    @plugin.stream(priority=1, capabilities=["response:write"])
    async def censor(ctx):
        ctx.delta = ctx.delta.replace("darn", "d**n")

    @plugin.stream(priority=2, capabilities=["response:read"], timeout=0.05)
    async def slow_for_tour_a(ctx):
        if ctx.tour_id == "A":
            await asyncio.sleep(5)

    @plugin.stream(priority=3, capabilities=["response:read"])
    async def watcher(ctx):
        seen.setdefault(ctx.tour_id, []).append((ctx.text_so_far, ctx.delta))
        ctx.delta = "observers cannot write"
"""


async def test_r3_stream_hooks_transform_observe_and_drop_a_slow_hook_for_this_stream(
        load_plugins: Loader) -> None:
    manager = load_plugins({"streamers.py": STREAMERS})
    base = tour(tour_id="A")
    hooks = manager.dispatcher.stream_hooks(base)
    assert hooks.active
    t0 = time.perf_counter()
    out = [await hooks.feed(d) for d in ["oh ", "darn", " it"]]
    assert time.perf_counter() - t0 < 1.5  # one timeout (50 ms), then the hook is off
    assert out == ["oh ", "d**n", " it"]
    assert hooks.text == "oh d**n it"
    records = {r.hook: r for r in hooks.finish()}
    assert records["censor"].outcome == "applied" and records["censor"].stats["modified"] == 1
    slow = records["slow_for_tour_a"]
    assert slow.outcome == "timeout" and slow.stats["deltas"] == 1
    assert "off for the rest of the stream" in (slow.reason or "")
    watcher = records["watcher"]
    assert watcher.outcome == "rejected" and watcher.stats["rejected"] == 3
    seen = manager.plugin("streamers").hooks[0].fn.__globals__["seen"]
    assert seen["A"] == [("", "oh "), ("oh ", "d**n"), ("oh d**n", " it")]
    assert [r.actor for r in base.changelog.records] == [
        "stage", "plugin:streamers.censor", "plugin:streamers.slow_for_tour_a", "plugin:streamers.watcher"]
    assert hooks.finish() is hooks.finish()


async def test_r3_a_slow_stream_hook_in_one_tour_does_not_stall_another(load_plugins: Loader) -> None:
    manager = load_plugins({"streamers.py": STREAMERS.replace("timeout=0.05", "timeout=3")})
    deltas = [f"d{i} " for i in range(20)]
    done_at: dict[str, float] = {}
    t0 = time.perf_counter()

    async def stream(tour_id: str) -> str:
        hooks = manager.dispatcher.stream_hooks(tour(tour_id=tour_id))
        out = [await hooks.feed(d) for d in deltas]
        done_at[tour_id] = time.perf_counter() - t0
        return "".join(out)

    task_a = asyncio.create_task(stream("A"))
    text_b = await stream("B")
    assert text_b == "".join(deltas)
    assert done_at["B"] < 0.5  # tour A's hook is sleeping its 3 s meanwhile
    task_a.cancel()
    try:
        await task_a
    except asyncio.CancelledError:
        pass
    assert "A" not in done_at


async def test_r3_stream_without_granted_hooks_is_inactive(load_plugins: Loader) -> None:
    manager = load_plugins({"streamers.py": STREAMERS}, grant_declared=False)
    hooks = manager.dispatcher.stream_hooks(tour())
    assert not hooks.active
    assert await hooks.feed("x") == "x"
    reasons = {r.hook: r.reason for r in hooks.finish()}
    assert reasons["censor"] == "permission not granted: response:write"
