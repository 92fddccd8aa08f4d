"""Client ops (R9.2), tool side: tools made from a client's declared operations, and the broker
that pairs each call sent to the client with the answer it posts back.

Must not: speak HTTP or SSE (the server emits the `client_op` event through the
`emit_client_op` service and posts answers to `ClientOpBroker.resolve`), or wait without a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.errors import InvalidInput, ToolError

TOOL_PREFIX = "client_"
MAX_OPS = 64
_OP_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,57}$")  # with the prefix, at most 64 characters

EmitClientOp = Callable[[str, str, dict[str, Any]], Awaitable[None] | None]
"""`emit_client_op(call_id, op_name, arguments)`: sends the SSE `client_op` event."""


@dataclass(frozen=True)
class ClientOpAnswer:
    content: str
    is_error: bool = False


class ClientOpBroker:
    """Per process: calls waiting for a client's answer, keyed by (tour_id, call_id)."""

    def __init__(self, *, remember: int = 4096) -> None:
        self._waiting: dict[tuple[str, str], asyncio.Future[ClientOpAnswer]] = {}
        self._closed: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._remember = remember

    def open(self, tour_id: str, call_id: str) -> asyncio.Future[ClientOpAnswer]:
        """Register a call before its event is sent, so an early answer is not lost."""
        key = (tour_id, call_id)
        if key in self._waiting or key in self._closed:
            raise ToolError(f"client op call {call_id} is already in use in this tour")
        future: asyncio.Future[ClientOpAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        return future

    def close(self, tour_id: str, call_id: str) -> None:
        """Forget a waiting call (answered, timed out or cancelled); later answers get False."""
        key = (tour_id, call_id)
        future = self._waiting.pop(key, None)
        if future is not None and not future.done():
            future.cancel()
        self._closed[key] = None
        while len(self._closed) > self._remember:
            self._closed.popitem(last=False)

    def resolve(self, tour_id: str, call_id: str, content: str, is_error: bool = False) -> bool:
        """Deliver the client's answer. False if no call waits (unknown, answered or expired)."""
        future = self._waiting.get((tour_id, call_id))
        if future is None or future.done():
            return False
        future.set_result(ClientOpAnswer(content, is_error))
        return True

    def known(self, tour_id: str, call_id: str) -> bool:
        """True if this call is waiting or was closed recently (HTTP: 409 rather than 404)."""
        key = (tour_id, call_id)
        return key in self._waiting or key in self._closed

    def waiting(self, tour_id: str | None = None) -> list[tuple[str, str]]:
        return [k for k in self._waiting if tour_id is None or k[0] == tour_id]

    def cancel_tour(self, tour_id: str) -> int:
        """Stop every call of a tour still waiting (the tour ended or was aborted)."""
        keys = self.waiting(tour_id)
        for tour, call in keys:
            self.close(tour, call)
        return len(keys)


def _check_op(op: object, seen: set[str]) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(op, Mapping):
        raise InvalidInput("each client op must be an object with name, description, parameters")
    name = op.get("name")
    if not isinstance(name, str) or not _OP_NAME_RE.match(name):
        raise InvalidInput(f"client op name {name!r} must match [A-Za-z0-9_-]{{1,57}}")
    if name in seen:
        raise InvalidInput(f"client op {name} is declared twice")
    seen.add(name)
    description = op.get("description", "")
    if not isinstance(description, str):
        raise InvalidInput(f"client op {name}: description must be a string")
    parameters = op.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise InvalidInput(f"client op {name}: parameters must be a JSON schema of type object")
    return name, description, dict(parameters)


def make_client_op_tools(ops: list[dict[str, Any]]) -> list[Tool]:
    """Tools for the operations a client declared (InvalidInput if the declaration is malformed).

    Each op `{"name", "description", "parameters"}` becomes the tool `client_<name>`; calls go
    to the client under the op's own name.
    """
    if not isinstance(ops, list):
        raise InvalidInput("client ops must be a list")
    if len(ops) > MAX_OPS:
        raise InvalidInput(f"at most {MAX_OPS} client ops may be declared")
    seen: set[str] = set()
    tools = []
    for op in ops:
        name, description, parameters = _check_op(op, seen)
        tools.append(Tool(
            name=TOOL_PREFIX + name,
            description=f"Runs on the client's own machine, not the core's. {description}".strip(),
            parameters=parameters,
            handler=_handler_for(name),
            roles=frozenset({"guest"}),
            requires_env=frozenset({"client_ops"}),
            kind="client_op",
            timeout=None,
        ))
    return tools


def _handler_for(op_name: str) -> Callable[[dict[str, Any], ToolContext], Awaitable[str]]:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        return await call_client_op(op_name, args, ctx)

    return handler


async def call_client_op(op_name: str, args: dict[str, Any], ctx: ToolContext) -> str:
    """Send one call to the client and wait for its answer, the timeout or the tour's abort."""
    broker: ClientOpBroker = ctx.service("client_ops")
    emit: EmitClientOp = ctx.service("emit_client_op")
    if not ctx.call_id:
        raise ToolError("a client op needs the call's id")
    future = broker.open(ctx.tour_id, ctx.call_id)
    aborted = asyncio.ensure_future(ctx.abort.wait())
    try:
        sent = emit(ctx.call_id, op_name, args)
        if inspect.isawaitable(sent):
            await sent
        timeout = ctx.settings.client_op_timeout
        done, _ = await asyncio.wait({future, aborted}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if future in done and not future.cancelled():
            answer = future.result()
            if answer.is_error:
                raise ToolError(answer.content or "the client reported a failure")
            return answer.content
        if aborted in done:
            raise ToolError("aborted")
        if future.cancelled():
            raise ToolError("the tour stopped waiting for the client")
        raise ToolError(f"the client did not answer within {timeout:g}s")
    finally:
        aborted.cancel()
        broker.close(ctx.tour_id, ctx.call_id)
