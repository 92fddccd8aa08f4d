"""R5.1/R5.3: the registry and run_tool turn every failure into an `error:` result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evacore.agent.registry import Tool, ToolContext, ToolRegistry, run_tool
from evacore.errors import Conflict, InvalidInput, ToolError


def _tool(name: str, handler: Any, *, timeout: float | None = 5.0, roles: str = "guest",
          required: tuple[str, ...] = ("text",)) -> Tool:
    return Tool(
        name=name, description=f"test tool {name}",
        parameters={"type": "object", "properties": {
            "text": {"type": "string"}, "count": {"type": "integer"},
            "mode": {"type": "string", "enum": ["a", "b"]},
        }, "required": list(required)},
        handler=handler, roles=frozenset({roles}), kind="plugin", timeout=timeout,
    )


async def _echo(args: dict[str, Any], ctx: ToolContext) -> str:
    return args["text"] * args.get("count", 1)


async def _slow(args: dict[str, Any], ctx: ToolContext) -> str:
    await asyncio.sleep(30)
    return "late"


async def _fails(args: dict[str, Any], ctx: ToolContext) -> str:
    if args["text"] == "tool":
        raise ToolError("the thing is missing")
    raise ValueError("boom")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([
        _tool("echo", _echo), _tool("slow", _slow, timeout=0.05), _tool("fails", _fails),
        _tool("secret", _echo, roles="master"),
    ])


async def test_r5_1_a_call_returns_the_exact_output(registry, make_ctx) -> None:
    outcome = await run_tool(registry, "echo", '{"text": "ab", "count": 2}', make_ctx("guest"))
    assert (outcome.output, outcome.error) == ("abab", False)
    assert outcome.duration_ms >= 0


@pytest.mark.parametrize(("arguments", "expected"), [
    ("{not json", "error: arguments are not valid JSON: "),
    ("[1, 2]", "error: arguments must be a JSON object, got array"),
    ("{}", "error: missing required argument 'text'"),
    ('{"text": 5}', "error: argument 'text' must be string, got integer"),
    ('{"text": "a", "count": true}', "error: argument 'count' must be integer, got boolean"),
    ('{"text": "a", "mode": "c"}', 'error: argument \'mode\' must be one of "a", "b"'),
])
async def test_r5_3_bad_arguments_become_error_results(registry, make_ctx, arguments,
                                                        expected) -> None:
    outcome = await run_tool(registry, "echo", arguments, make_ctx())
    assert outcome.error
    assert outcome.output.startswith(expected)


async def test_r5_3_empty_arguments_mean_no_arguments(make_ctx) -> None:
    async def shows(args: dict[str, Any], ctx: ToolContext) -> str:
        return repr(args)

    registry = ToolRegistry([_tool("hello", shows, required=())])
    outcome = await run_tool(registry, "hello", "", make_ctx())
    assert (outcome.output, outcome.error) == ("{}", False)


async def test_r5_3_unknown_or_not_offered_tool_is_an_error_result(registry, make_ctx) -> None:
    unknown = await run_tool(registry, "nope", "{}", make_ctx())
    assert unknown.error and unknown.output.startswith("error: unknown tool 'nope'")
    hidden = await run_tool(registry, "secret", '{"text": "x"}', make_ctx("guest"))
    assert hidden.output.startswith("error: unknown tool 'secret'; available: echo, slow, fails")
    shown = await run_tool(registry, "secret", '{"text": "x"}', make_ctx("master"))
    assert shown.output == "x"


async def test_r5_3_timeout_becomes_error_result(registry, make_ctx) -> None:
    outcome = await run_tool(registry, "slow", '{"text": "x"}', make_ctx())
    assert outcome == outcome.__class__("error: timed out after 0.05s", True, outcome.duration_ms)
    assert outcome.duration_ms < 2000


async def test_r5_3_settings_override_a_tools_timeout(registry, make_ctx) -> None:
    ctx = make_ctx(tool_timeouts={"echo": 0.01, "slow": 0.02})
    outcome = await run_tool(registry, "slow", '{"text": "x"}', ctx)
    assert outcome.output == "error: timed out after 0.02s"


async def test_r5_3_exceptions_become_error_results(registry, make_ctx) -> None:
    tool_error = await run_tool(registry, "fails", '{"text": "tool"}', make_ctx())
    assert (tool_error.output, tool_error.error) == ("error: the thing is missing", True)
    crash = await run_tool(registry, "fails", '{"text": "other"}', make_ctx())
    assert (crash.output, crash.error) == ("error: ValueError: boom", True)


async def test_r5_3_abort_stops_a_running_tool(registry, make_ctx) -> None:
    ctx = make_ctx(tool_timeouts={"slow": 30})
    task = asyncio.create_task(run_tool(registry, "slow", '{"text": "x"}', ctx))
    await asyncio.sleep(0.02)
    ctx.abort.set()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.output == "error: aborted"
    already = await run_tool(registry, "echo", '{"text": "x"}', ctx)
    assert already.output == "error: aborted"


async def test_r5_3_the_tours_own_cancellation_propagates(registry, make_ctx) -> None:
    cancelled: list[bool] = []

    async def records(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return ""

    registry.register(_tool("records", records))
    task = asyncio.create_task(run_tool(registry, "records", '{"text": "x"}', make_ctx()))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [True]


def test_r5_2_schemas_use_the_openai_function_shape(registry) -> None:
    (schema,) = registry.schemas([registry.get("echo")])
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "echo"
    assert schema["function"]["description"] == "test tool echo"
    assert schema["function"]["parameters"]["required"] == ["text"]


def test_a_tools_schema_is_built_once_and_the_wire_body_carries_it_as_is(registry) -> None:
    from evacore.providers.openai_chat import serialize_tools

    tool = registry.get("echo")
    schema = tool.schema()
    assert tool.schema() is schema  # every tour offering it shares one object
    external = {"type": "function", "extra": 1,
                "function": {"name": "client", "parameters": {"type": "object"}, "x": 2}}
    bare = {"name": "bare", "description": "no envelope"}
    wire = serialize_tools([schema, external, bare])
    assert wire[0] is schema
    assert wire[1] == {"type": "function",
                       "function": {"name": "client", "parameters": {"type": "object"}}}
    assert wire[2] == {"type": "function",
                       "function": {"name": "bare", "description": "no envelope"}}
    offered = [schema, registry.get("fails").schema()]
    again = serialize_tools(list(offered))
    assert again == offered and all(a is b for a, b in zip(again, offered, strict=True))
    again.append(external)  # the caller's own list: the next tour's is not touched
    assert serialize_tools(list(offered)) == offered
    assert serialize_tools([offered[1], offered[0]]) == [offered[1], offered[0]]


def test_offered_tools_follow_the_registry_and_the_policy(registry) -> None:
    from evacore.agent.registry import ToolPolicy
    from evacore.pipeline.tour_tools import tool_policy

    def names(role: str, policy: ToolPolicy) -> list[str]:
        return [t.name for t in registry.offered(role, ["master"], policy=policy)]

    plain = ToolPolicy()
    assert names("guest", plain) == ["echo", "slow", "fails"]
    registry.offered("guest", ["master"], policy=plain).clear()  # the caller's own list
    assert names("guest", plain) == ["echo", "slow", "fails"]
    assert names("master", plain) == ["echo", "slow", "fails", "secret"]
    registry.register(_tool("late", _echo))
    assert names("guest", plain) == ["echo", "slow", "fails", "late"]
    registry.unregister("echo")
    assert names("guest", plain) == ["slow", "fails", "late"]
    assert names("guest", ToolPolicy.from_dict({"guest": {"deny": ["slow"]}})) == \
        ["fails", "late"]
    table = {"master": {"deny": ["secret"]}}
    denying = tool_policy(table)
    assert tool_policy(table) is denying  # read once while the table stays the same
    assert names("master", denying) == ["slow", "fails", "late"]
    table["master"]["deny"] = ["late"]  # the settings' table changed in place
    assert names("master", tool_policy(table)) == ["slow", "fails", "secret"]


def test_r5_2_names_are_unique_and_valid(registry) -> None:
    with pytest.raises(Conflict):
        registry.register(_tool("echo", _echo))
    with pytest.raises(InvalidInput):
        _tool("has space", _echo)
    registry.unregister("echo")
    assert registry.get("echo") is None
    registry.register(_tool("echo", _echo))


def test_r5_2_with_tools_leaves_the_base_registry_alone(registry) -> None:
    tour = registry.with_tools([_tool("extra", _echo)])
    assert tour.get("extra") is not None
    assert registry.get("extra") is None
    with pytest.raises(Conflict):
        registry.with_tools([_tool("echo", _echo)])


async def test_r5_3_a_plain_function_handler_still_gives_a_result(make_ctx) -> None:
    def not_async(args: dict[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError("sync failure")

    registry = ToolRegistry([_tool("plain", not_async, required=())])
    outcome = await run_tool(registry, "plain", "{}", make_ctx())
    assert (outcome.output, outcome.error) == ("error: RuntimeError: sync failure", True)
