"""Pieces of the hook contract used by dispatch.py: the guarded call, copies, the change check.

Must not: be imported outside evacore.plugins; decide order or permissions (dispatch.py does).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Generator
from copy import deepcopy
from itertools import chain
from time import perf_counter
from typing import Any

from evacore.prompt.changelog import ElementChanges, diff_elements

_SCALARS = frozenset({str, int, float, bool, type(None)})
ROLES = frozenset({"system", "user", "assistant", "tool"})


async def guarded(fn: Callable[[Any], Awaitable[Any]], arg: Any,
                  timeout: float) -> tuple[str, BaseException | None, float]:
    """Run `await fn(arg)` in the caller's task with a deadline; returns (outcome, exc, ms).

    Outcome is "ok", "timeout" or "error". Any exception the hook raises (SystemExit,
    KeyboardInterrupt, its own TimeoutError or CancelledError too) is an error; only the
    tour's own cancellation, requested from outside, propagates. The hook runs in the
    caller's task (never a new task), so its SystemExit cannot reach the event loop. A hook
    that finishes without suspending costs no timer; one that suspends finishes under
    `asyncio.timeout`. A hook that returns after its deadline counts as timed out.
    """
    t0 = perf_counter()
    try:
        coro = fn(arg)
        pending = coro.send(None)
    except StopIteration:
        ms = (perf_counter() - t0) * 1000
        return ("timeout" if ms > timeout * 1000 else "ok"), None, ms
    except BaseException as exc:  # noqa: BLE001 - the contract: nothing a hook raises escapes
        return "error", exc, (perf_counter() - t0) * 1000
    task = asyncio.current_task()
    cancelling = task.cancelling() if task is not None else 0
    cm = asyncio.timeout(timeout - (perf_counter() - t0))
    try:
        async with cm:
            await _resume(coro, pending)
    except TimeoutError as exc:
        outcome, err = ("timeout", None) if cm.expired() else ("error", exc)
        return outcome, err, (perf_counter() - t0) * 1000
    except asyncio.CancelledError as exc:
        if task is None or task.cancelling() > cancelling:
            raise
        return "error", exc, (perf_counter() - t0) * 1000
    except BaseException as exc:  # noqa: BLE001
        return "error", exc, (perf_counter() - t0) * 1000
    ms = (perf_counter() - t0) * 1000
    return ("timeout" if cm.expired() else "ok"), None, ms


@types.coroutine
def _resume(coro: Any, pending: Any) -> Generator[Any, None, Any]:
    """Go on driving a coroutine whose first step already ran (what `await` does after it)."""
    while True:
        try:
            yield pending
        except BaseException as exc:  # noqa: BLE001 - from the task (cancellation): hand it on
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            pending = coro.send(None)
        except StopIteration as stop:
            return stop.value


def deep_flags(elements: list[dict[str, Any]]) -> list[bool] | None:
    """Per element: does it hold a mutable value (a list of parts, tool calls)? None if none do."""
    if _SCALARS.issuperset(map(type, chain.from_iterable(map(dict.values, elements)))):
        return None
    return [not _SCALARS.issuperset(map(type, e.values())) for e in elements]


def copy_elements(elements: list[dict[str, Any]], flags: list[bool] | None) -> list[dict[str, Any]]:
    """A copy a hook may change freely: new dicts, nested values deep-copied only where present."""
    if flags is None:
        return list(map(dict.copy, elements))
    return [
        {k: (v if type(v) in _SCALARS else deepcopy(v)) for k, v in e.items()} if f else e.copy()
        for e, f in zip(elements, flags)
    ]


def check_changes(before: list[dict[str, Any]], after: object, plugin: str, counter: list[int],
                  editable: frozenset[str] = frozenset()) -> tuple[list[dict[str, Any]], ElementChanges] | str:
    """Validate a writing hook's result against the contract; a string is the rejection reason.

    New elements get a host id (`plugin:<name>:<n>`) if they have none, `source` =
    `plugin:<name>`, `protected` = False and `tokens` = None. Changed content resets `tokens`
    to None, so the pipeline recounts. Protected elements may move and have their content
    edited, but not go; their role and flag stay. (`editable` is kept for callers; every
    protected element's content is editable.)
    """
    if not isinstance(after, list):
        return f"messages must be a list, got {type(after).__name__}"
    by_id = {e.get("id"): e for e in before}
    seen: set[Any] = set()
    out: list[dict[str, Any]] = []
    for i, e in enumerate(after):
        if not isinstance(e, dict):
            return f"element {i} is a {type(e).__name__}, not a dict"
        eid = e.get("id")
        if eid is not None and not isinstance(eid, str):
            return f"element {i}: id must be a string, got {type(eid).__name__}"
        if eid is not None and eid in seen:
            return f"duplicate element id {eid!r}"
        prev = by_id.get(eid) if eid is not None else None
        if prev is None:
            if eid is None or eid == "":
                eid = _new_id(plugin, counter, by_id, seen)
                e["id"] = eid
            e["source"] = f"plugin:{plugin}"
            e["protected"] = False
            e["tokens"] = None
            e.setdefault("kind", "other")
            bad = _shape_error(e)
            if bad:
                return bad
        elif prev is not e and prev != e:
            if prev.get("protected"):
                # R3.4: protected content may be edited, never removed; role and flag stay
                for f in ("role", "protected"):
                    if e.get(f) != prev.get(f):
                        return f"altered protected element {eid!r} ({f})"
            elif e.get("protected"):
                return f"marked element {eid!r} protected (a plugin cannot create protected content)"
            if e.get("source") != prev.get("source"):
                return f"changed the source of element {eid!r}"
            if e.get("content") != prev.get("content") or e.get("tokens") != prev.get("tokens"):
                e["tokens"] = None
            bad = _shape_error(e)
            if bad:
                return bad
        seen.add(eid)
        out.append(e)
    for e in before:
        if e.get("protected") and e.get("id") not in seen:
            return f"removed protected element {e.get('id')!r}"
    return out, diff_elements(before, out)


def _new_id(plugin: str, counter: list[int], taken: dict[Any, Any], seen: set[Any]) -> str:
    while True:
        counter[0] += 1
        candidate = f"plugin:{plugin}:{counter[0]}"
        if candidate not in taken and candidate not in seen:
            return candidate


def _shape_error(e: dict[str, Any]) -> str | None:
    if e.get("role") not in ROLES:
        return f"element {e.get('id')!r}: role must be one of {sorted(ROLES)}, got {e.get('role')!r}"
    content = e.get("content")
    if not isinstance(content, (str, list)):
        return f"element {e.get('id')!r}: content must be a string or a list of parts"
    return None


def describe_error(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    text = str(exc)
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:500]
