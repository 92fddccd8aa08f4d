"""R9.2: client ops are tools whose calls go to the client and whose answers come back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evacore.agent.registry import ToolRegistry, run_tool
from evacore.agent.tools import default_registry
from evacore.agent.tools.client_ops import ClientOpBroker, make_client_op_tools
from evacore.errors import InvalidInput

OPS = [{"name": "read_file", "description": "Read a file on my laptop.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}]
ENV = frozenset({"client_ops", "master"})


class FakeClient:
    """Plays the HTTP layer: records `client_op` events and can answer them."""

    def __init__(self, broker: ClientOpBroker, answer: str | None = None,
                 is_error: bool = False) -> None:
        self.broker, self.answer, self.is_error = broker, answer, is_error
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def emit(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.events.append((call_id, name, arguments))
        if self.answer is not None:
            loop = asyncio.get_running_loop()
            loop.call_soon(self.broker.resolve, "tour-1", call_id, self.answer, self.is_error)


def _registry() -> ToolRegistry:
    return default_registry().with_tools(make_client_op_tools(OPS))


async def _call(ctx, call_id: str = "call-1") -> tuple[str, bool]:
    outcome = await run_tool(_registry(), "client_read_file", json.dumps({"path": "~/a.txt"}),
                             ctx, call_id=call_id)
    return outcome.output, outcome.error


async def test_r9_2_round_trip_resolves_the_call(make_ctx) -> None:
    broker = ClientOpBroker()
    client = FakeClient(broker, answer="file body\n")
    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": client.emit})
    assert await _call(ctx) == ("file body\n", False)
    assert client.events == [("call-1", "read_file", {"path": "~/a.txt"})]
    assert broker.waiting() == []
    assert broker.resolve("tour-1", "call-1", "again") is False
    assert broker.known("tour-1", "call-1")


async def test_r9_2_client_error_becomes_an_error_result(make_ctx) -> None:
    broker = ClientOpBroker()
    client = FakeClient(broker, answer="permission denied", is_error=True)
    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": client.emit})
    assert await _call(ctx) == ("error: permission denied", True)


async def test_r9_2_unanswered_op_times_out_into_an_error(make_ctx) -> None:
    broker = ClientOpBroker()
    client = FakeClient(broker)
    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": client.emit},
                   client_op_timeout=0.1)
    assert await _call(ctx) == ("error: the client did not answer within 0.1s", True)
    assert broker.resolve("tour-1", "call-1", "too late") is False
    assert broker.known("tour-1", "call-1")
    assert not broker.known("tour-1", "never-sent")


async def test_r9_2_abort_stops_waiting(make_ctx) -> None:
    broker = ClientOpBroker()
    client = FakeClient(broker)
    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": client.emit})
    task = asyncio.create_task(_call(ctx))
    while not broker.waiting("tour-1"):
        await asyncio.sleep(0.005)
    ctx.abort.set()
    assert await asyncio.wait_for(task, 2) == ("error: aborted", True)
    assert broker.waiting() == []


async def test_r9_2_cancel_tour_releases_its_calls(make_ctx) -> None:
    broker = ClientOpBroker()
    client = FakeClient(broker)
    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": client.emit})
    task = asyncio.create_task(_call(ctx))
    while not broker.waiting("tour-1"):
        await asyncio.sleep(0.005)
    assert broker.cancel_tour("tour-1") == 1
    assert await asyncio.wait_for(task, 2) == ("error: the tour stopped waiting for the client", True)


async def test_r9_2_answer_sent_before_the_wait_starts_is_not_lost(make_ctx) -> None:
    broker = ClientOpBroker()

    def answer_at_once(call_id: str, name: str, arguments: dict[str, Any]) -> None:
        assert broker.resolve("tour-1", call_id, "instant")

    ctx = make_ctx(env=ENV, services={"client_ops": broker, "emit_client_op": answer_at_once})
    assert await _call(ctx) == ("instant", False)


async def test_r9_2_client_ops_need_the_env_flag_and_the_services(make_ctx) -> None:
    output, error = await _call(make_ctx(env=frozenset({"master"})))
    assert error and output.startswith("error: unknown tool 'client_read_file'")
    output, error = await _call(make_ctx(env=ENV))
    assert (output, error) == ("error: client_ops is not available in this tour", True)


def test_r9_2_declared_ops_become_prefixed_tools() -> None:
    (tool,) = make_client_op_tools(OPS)
    assert tool.name == "client_read_file"
    assert tool.kind == "client_op" and tool.requires_env == frozenset({"client_ops"})
    assert tool.description == "Runs on the client's own machine, not the core's. Read a file on my laptop."
    assert tool.parameters["required"] == ["path"]
    (bare,) = make_client_op_tools([{"name": "ping"}])
    assert bare.parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize(("ops", "message"), [
    ([{"name": "has space"}], "must match"),
    ([{"name": "a"}, {"name": "a"}], "declared twice"),
    ([{"name": "a", "parameters": {"type": "string"}}], "type object"),
    ([{"name": "a", "description": 3}], "description must be a string"),
    (["shell"], "must be an object"),
    ([{"name": f"op{i}"} for i in range(65)], "at most 64"),
])
def test_r9_2_malformed_declarations_are_refused(ops, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        make_client_op_tools(ops)
