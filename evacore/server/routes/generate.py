"""`POST /v1/chats/{id}/generate` (R8.3, R12.4): start a tour, stream it as SSE or answer JSON.

Must not: run stages; the tour runs as a task of this instance and outlives nothing: a
client that disconnects fires the tour's abort, which closes the upstream request at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from evacore.agent.tools.client_ops import make_client_op_tools
from evacore.domain.roles import ENV_FLAGS, env_for_role
from evacore.errors import EvacoreError, InvalidInput, ProviderError
from evacore.pipeline.tour import Tour
from evacore.server.auth import AnyUser
from evacore.server.deps import CoreDep
from evacore.server.errors import error_response
from evacore.server.sse import sse_frame

router = APIRouter(tags=["generate"])


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(default="", max_length=1_000_000)
    images: list[Any] = Field(default_factory=list, max_length=16)


class ClientOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,57}$")
    description: str = Field(default="", max_length=4000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class GenerateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: MessageBody | None = None
    mode: Literal["normal", "regenerate", "swipe", "continue", "impersonate", "quiet"] = "normal"
    stream: bool = True
    env: dict[str, bool] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    prefill: str | None = Field(default=None, max_length=100_000)
    client_ops: list[ClientOp] = Field(default_factory=list, max_length=64)


_STATUS: dict[str, int] = {}


def status_for(code: str) -> int:
    """The HTTP status of a failed tour's error code, from the exception tree; every provider
    failure (timeouts included) is 502 in a generate answer (§13)."""
    if not _STATUS:
        stack = [EvacoreError]
        while stack:
            cls = stack.pop()
            _STATUS[cls.code] = 502 if issubclass(cls, ProviderError) else cls.status
            stack.extend(cls.__subclasses__())
    return _STATUS.get(code, 500)


def step_limit(asked: Any, limit: int) -> int:
    """A request's `params.max_steps`: a positive integer that may lower `agent.max_steps`
    for this tour, never raise it (R5.1)."""
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        raise InvalidInput("params.max_steps must be a positive integer")
    return min(asked, limit)


async def build_tour(core: Any, chat_id: str, body: GenerateIn, who: Any) -> Tour:
    """The tour a request asks for, checked without touching the database: stage 1 reads
    the chat (a chat that is not the caller's is a 404 there) and sets `env.picture` from
    its connection."""
    images = body.message.images if body.message else []
    env = env_for_role(who.role)
    env["client_ops"] = bool(body.client_ops)
    env["picture"] = bool(images)
    overrides = None
    if body.env:
        unknown = set(body.env) - set(ENV_FLAGS)
        if unknown:
            raise InvalidInput(f"unknown env flags: {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(ENV_FLAGS)}")
        if who.is_master:
            overrides = dict(body.env)
            env.update(overrides)
    if body.mode == "normal" and not (body.message and (body.message.content or images)):
        raise InvalidInput("message.content is required in normal mode")
    client_ops = [op.model_dump() for op in body.client_ops]
    make_client_op_tools(client_ops)  # a malformed declaration is a 422 before the tour starts
    params = dict(body.params)
    if "max_steps" in params:
        params["max_steps"] = step_limit(params["max_steps"], core.settings.agent.max_steps)
    if body.prefill is not None:
        params["prefill"] = body.prefill
    return Tour(
        chat_id=chat_id, user_id=who.user_id, role=who.role, mode=body.mode, stream=body.stream,
        env=env, env_overrides=overrides,
        input_text=body.message.content if body.message else "",
        input_images=images, params=params,
        client_ops=client_ops,
    )


def result_json(tour: Tour) -> dict[str, Any]:
    message_id, variant_id = tour.data.get("saved") or (None, None)
    return {
        "tour_id": tour.id,
        "message_id": message_id,
        "variant_id": variant_id,
        "content": tour.answer,
        "steps": [s.stored() for s in tour.steps if s.tool_calls],
        "finish_reason": tour.finish_reason,
        "usage": tour.usage,
        "status": tour.status,
    }


@router.post("/chats/{chat_id}/generate")
async def generate(chat_id: str, body: GenerateIn, who: AnyUser, core: CoreDep,
                   request: Request) -> Any:
    tour = await build_tour(core, chat_id, body, who)
    manager = core.services["tours"]
    if not body.stream:
        task = manager.start(tour)
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():  # nobody waits for the answer any more: stop paying for it
                manager.abort_local(tour.id, "client disconnected")
            await asyncio.shield(task)
        except asyncio.CancelledError:
            manager.abort_local(tour.id, "client disconnected")
            raise
        finally:
            gone.cancel()
        if tour.error:
            return error_response(status_for(tour.error["code"]), tour.error["code"],
                                  tour.error["message"], tour_id=tour.id)
        return JSONResponse(result_json(tour))
    manager.start(tour)
    events = aiter(tour.events.batches())
    try:
        first = await anext(events, None)
    except asyncio.CancelledError:
        manager.abort_local(tour.id, "client disconnected")
        raise
    if first is not None and first[0][0] == "error":
        # stage 1 refused the request (bad mode, empty chat…): a plain HTTP error, no stream
        code, message = first[0][1]["code"], first[0][1]["message"]
        return error_response(status_for(code), code, message, tour_id=tour.id)
    return TourStream(manager, tour, _stream(first, events))


async def _client_gone(request: Request) -> None:
    """Return when the client closes its connection (the body has been read already, so
    the next ASGI message is the disconnect; servers do not cancel the endpoint for it)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class TourStream(StreamingResponse):
    """The tour's events as SSE. However the response ends (finished, client gone, server
    cancelled it before the first byte), a tour still running then is aborted at once."""

    def __init__(self, manager: Any, tour: Tour, frames: AsyncIterator[bytes]) -> None:
        super().__init__(frames, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                                  "X-Tour-Id": tour.id})
        self.manager, self.tour_id = manager, tour.id

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.manager.abort_local(self.tour_id, "client disconnected")


Batch = list[tuple[str, dict[str, Any]]]


async def _stream(first: Batch | None, batches: AsyncIterator[Batch]) -> AsyncIterator[bytes]:
    """One write per batch of queued events (a burst from the provider goes out at once)."""
    if first is None:
        return
    yield b"".join(sse_frame(name, data) for name, data in first)
    async for batch in batches:
        yield b"".join(sse_frame(name, data) for name, data in batch)
