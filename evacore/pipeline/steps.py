"""The step loop (R5.1): stages 10-12 per step, stream rules on each answer, tools between steps.

Must not: build the prompt (stages 1-9) or save (stage 14). It works on the tour's prompt
copy only: service insertions (`<system-reminder>`, `<system-interrupt>`) live there and
are never stored or streamed (R6.5, R6.6). A kept answer that calls a tool the client runs
itself (`tour.external_tools`) ends the tour after evacore's own calls of that answer have
run: `finish_reason` is `tool_calls` and the client's results come with its next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evacore.agent.registry import ToolContext, ToolOutcome, run_tool
from evacore.logs import get_logger
from evacore.pipeline.stages.base import run_stage
from evacore.pipeline.tour import Step
from evacore.pipeline.tour_tools import prepare_steps
from evacore.rules.engine import insert_reminders

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.stages.base import Stage
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)


async def run_steps(core: Core, tour: Tour, stages: Sequence[Stage]) -> None:
    """Run steps (each one pass of `stages`, 10-12) until an answer without tool calls, the
    step limit, or abort."""
    await prepare_steps(core, tour)
    max_steps = step_limit(tour.params.get("max_steps"), core.settings.agent.max_steps)
    tour.data.setdefault("prompt_copy", list(tour.data["messages"]))
    rules = tour.data.get("rules")
    tools = tour.data.get("tools")
    announce(tour, held=bool(rules is not None and rules.any_text_rule_armed()))
    while True:
        if len(tour.steps) >= max_steps:
            tour.finish_reason = "max_steps"
            tour.diagnostics["stopped"] = f"the step limit ({max_steps}) was reached"
            break
        step = Step(index=len(tour.steps))
        tour.data["step"] = step
        holding = bool(rules is not None and rules.any_text_rule_armed())
        tour.data["holding"] = holding
        if holding:
            tour.events.emit("hold", {"step": step.index})
        for stage in stages:
            await run_stage(core, tour, stage)
        verdict = rules.check_answer(step.text) if rules is not None else None
        if verdict is not None and verdict.action == "discard":
            step.discarded = True
            tour.data["partial"] = []  # an abort before the retry streams must not save it
            _add_usage(tour, step)  # a discarded step was still paid for
            tour.diagnostics.setdefault("discarded", []).append(
                {"step": step.index, "rule": verdict.rule.name if verdict.rule else None}
            )
            tour.data["prompt_copy"] = [
                *tour.data["prompt_copy"], {"role": "user", "content": verdict.interrupt}
            ]
            tour.data["retrying"] = True
            continue
        tour.data["retrying"] = False
        if holding:
            _release(tour, step)
        tour.steps.append(step)
        _add_usage(tour, step)
        if not step.tool_calls:
            tour.answer = step.text
            tour.finish_reason = step.finish_reason or "stop"
            break
        external = tour.data.get("external_names") or frozenset()
        own = [c for c in step.tool_calls if c["name"] not in external]
        if len(own) < len(step.tool_calls):
            for call in step.tool_calls:
                if call["name"] in external:
                    call["external"] = True
            await _run_tools(core, tour, step, rules, tools, own)
            tour.data.pop("step_results_prompt", None)
            tour.answer = ""  # the text is the step's; the answer goes on in the next request
            tour.finish_reason = "tool_calls"
            break
        await _run_tools(core, tour, step, rules, tools, own)
        tour.data["prompt_copy"] = [
            *tour.data["prompt_copy"],
            {
                "role": "assistant",
                "content": step.text,
                "tool_calls": [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in step.tool_calls
                ],
            },
            *tour.data.pop("step_results_prompt"),
        ]
    if tour.finish_reason == "max_steps" and tour.steps:
        tour.answer = tour.steps[-1].text if not tour.steps[-1].tool_calls else ""


def step_limit(asked: object, limit: int) -> int:
    """A request may lower the configured step limit, never raise it."""
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        return min(asked, limit)
    return limit


def announce(tour: Tour, *, held: bool) -> None:
    """The `tour` event, once, first: the tour id and whether answers are held (R8.4)."""
    if not tour.data.get("announced"):
        tour.data["announced"] = True
        tour.events.emit("tour", {"tour_id": tour.id, "held": held, "chat_id": tour.chat_id})


def _release(tour: Tour, step: Step) -> None:
    """A held answer passed: send it in one piece (text first, then its declared calls)."""
    text = step.text
    if not tour.data.get("prefill_sent"):
        # Text the client already has (the message being continued) is not sent again.
        hidden = len(tour.data.get("prefill", "")) - len(tour.data.get("prefill_client", ""))
        text = text[max(hidden, 0):]
    if text:
        tour.events.emit("delta", {"text": text})
        tour.data["prefill_sent"] = True
    for call in step.tool_calls:
        tour.events.emit("tool_call", dict(call))


def _add_usage(tour: Tour, step: Step) -> None:
    if not step.usage:
        return
    for key, value in step.usage.items():
        tour.usage[key] = tour.usage.get(key, 0) + int(value or 0)


async def _run_tools(core: Core, tour: Tour, step: Step, rules: Any, tools: Any,
                     calls: list[dict[str, Any]]) -> None:
    """Execute `calls` of the step in order (adjacent concurrency-safe calls run together)."""
    max_chars = core.settings.context.tool_result_max_chars
    outcomes: dict[str, ToolOutcome] = {}
    i = 0
    while i < len(calls):
        batch = [calls[i]]
        if tools is not None and _safe(tools, calls[i]["name"]):
            while i + len(batch) < len(calls) and _safe(tools, calls[i + len(batch)]["name"]):
                batch.append(calls[i + len(batch)])
        results = await asyncio.gather(*(_call(core, tour, tools, c) for c in batch))
        for call, outcome in zip(batch, results, strict=True):
            outcomes[call["id"]] = outcome
            step.results.append({"id": call["id"], "content": outcome.output,
                                 "error": outcome.error, "duration_ms": outcome.duration_ms})
            tour.events.emit("tool_result", {"id": call["id"], "content": outcome.output})
        i += len(batch)
    prompt_results = []
    for call in calls:
        reminders = rules.reminders_for_call(call["name"], call["arguments"]) if rules else []
        content = insert_reminders(outcomes[call["id"]].output, reminders, max_chars=max_chars)
        prompt_results.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    tour.data["step_results_prompt"] = prompt_results


def _safe(tools: Any, name: str) -> bool:
    tool = tools.registry.get(name)
    return bool(tool is not None and tool.concurrency_safe)


async def _call(core: Core, tour: Tour, tools: Any, call: dict[str, Any]) -> ToolOutcome:
    if tools is None:
        return ToolOutcome(f"error: unknown tool {call['name']!r}", True, 0)
    ctx = ToolContext(
        workspace=core.settings.workspace_dir,
        role=tour.role,
        env=tour.flags(),
        abort=tour.abort.event,
        tour_id=tour.id,
        chat_id=tour.chat_id,
        services=tools.services,
        settings=tools.settings,
        policy=tools.policy,
    )
    return await run_tool(tools.registry, call["name"], call["arguments"], ctx, call_id=call["id"])
