"""Benchmark the plugin dispatcher: overhead per tour of 10 interceptor hooks on a 50-element
prompt, and the change log's diff of a 200-element prompt (what a writing hook's turn adds).

Must not: touch storage or the network; the hooks are real plugin files loaded through
discovery, doing nothing (the overhead) or reading every message (copy and change check).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evacore.plugins import CtxBase, PluginManager, discover
from evacore.prompt.changelog import diff_elements

TARGET_US = 200.0
DIFF_TARGET_MS = 20.0

_PLUGIN = """
from evacore.plugins import Plugin
plugin = Plugin(name="bench-{i}", version="1")

@plugin.interceptor(priority=100, capabilities=["{cap}"])
async def hook(ctx):
{body}
"""
_BODIES = {
    "noop": "    pass",
    "reads": "    total = 0\n    for m in ctx.messages:\n        total += len(m['content'])",
}


def _prompt() -> list[dict[str, Any]]:
    out = [{"id": "sys", "role": "system", "content": "You are Eva. " * 40, "protected": True,
            "source": "system", "kind": "system", "tokens": 120, "name": None, "tool_calls": None,
            "tool_call_id": None}]
    for i in range(48):
        out.append({"id": f"history:{i}", "role": "user" if i % 2 else "assistant",
                    "content": f"message {i} " + "lorem ipsum dolor " * 15, "protected": False,
                    "source": f"history:{i}", "kind": "history", "tokens": 60, "name": None,
                    "tool_calls": None, "tool_call_id": None})
    out.append({"id": "input", "role": "user", "content": "And now?", "protected": True,
                "source": "history:input", "kind": "input", "tokens": 4, "name": None,
                "tool_calls": None, "tool_call_id": None})
    return out


async def _measure(manager: PluginManager, tours: int) -> list[float]:
    messages = _prompt()
    dispatcher = manager.dispatcher
    for _ in range(min(200, tours)):
        await dispatcher.run_interceptors(messages, ctx_base=CtxBase(tour_id="warm"))
    samples = []
    for n in range(tours):
        base = CtxBase(tour_id=f"t{n}", abort=asyncio.Event())
        t0 = time.perf_counter()
        result = await dispatcher.run_interceptors(messages, ctx_base=base)
        samples.append((time.perf_counter() - t0) * 1e6)
        assert not result.changed
    return samples


def _manager(folder: Path, cap: str, kind: str) -> PluginManager:
    for i in range(10):
        source = _PLUGIN.format(i=i, cap=cap, body=_BODIES[kind])
        (folder / f"bench_{i}.py").write_text(source, encoding="utf-8")
    manager = PluginManager(discover(folder, entry_points=False, builtins=False))
    for i in range(10):
        manager.update(f"bench-{i}", permissions=[cap])
    return manager


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Time `run_interceptors` per tour: 10 no-op hooks (target < 200 µs), 10 reading hooks."""
    tours = 500 if quick else 5000
    rows: list[dict[str, Any]] = []
    cases = [("noop", "prompt:write", "10 no-op prompt:write interceptors, 50-element prompt"),
             ("reads", "prompt:read", "10 prompt:read interceptors reading all 50 messages"),
             ("reads", "prompt:write", "10 prompt:write interceptors reading all 50 messages")]
    for kind, cap, note in cases:
        with tempfile.TemporaryDirectory(prefix="evacore-bench-dispatch-") as folder:
            manager = _manager(Path(folder), cap, kind)
            samples = asyncio.run(_measure(manager, tours))
        name = f"{kind}_{cap.split(':')[1]}"
        target = TARGET_US if kind == "noop" else None
        for metric, value in (("p50", statistics.median(samples)), ("p99", _pct(samples, 0.99))):
            rows.append({"bench": "dispatch", "metric": f"{name}_{metric}_us_per_tour", "value": value,
                         "unit": "µs", "target": f"< {TARGET_US:g} µs" if target else None,
                         "met": (value < target) if target and metric == "p50" else None, "note": note})
    rows.append(_diff_row(20 if quick else 200))
    return rows


def _diff_row(rounds: int) -> dict[str, Any]:
    """The change log's diff of a 200-element prompt with one element changed, one added,
    one removed and one moved (p50 over `rounds`)."""
    before = [{"id": f"e{i}", "role": "user", "content": f"text {i} " * 30, "source": "history",
               "kind": "history", "protected": False, "tokens": 60, "name": None,
               "tool_calls": None, "tool_call_id": None} for i in range(200)]
    after = [dict(e) for e in before]
    after[10]["content"] = "changed"
    after.insert(50, {**before[0], "id": "new", "content": "n"})
    del after[150]
    after.append(after.pop(3))
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        diff_elements(before, after)
        samples.append((time.perf_counter() - t0) * 1000)
    value = statistics.median(samples)
    return {"bench": "dispatch", "metric": "changelog_diff_200_elements_p50_ms", "value": value,
            "unit": "ms", "target": f"< {DIFF_TARGET_MS:g} ms", "met": value < DIFF_TARGET_MS,
            "note": "the change log's diff of a 200-element prompt: one element changed, one "
                    "added, one removed, one moved"}


if __name__ == "__main__":
    for row in run(quick=True):
        print(f"{row['metric']:>36}: {row['value']:9.1f} {row['unit']}  {row['note']}")
