"""`POST /v1/chats/{id}/generate` (R8.3, R12.4): the body becomes a `TourRequest` through the
core's one door; the tour streams back as SSE or answers as JSON.

Must not: run stages or check the request's meaning (the door does); the tour runs as a
task of this instance and outlives nothing: a client that disconnects fires the tour's
abort, which closes the upstream request at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.types import Receive

from evacore.channels.event_stream import EventStream, LastChunk, TextFrame, client_gone
from evacore.core import Core
from evacore.domain.connection_params import RequestParamsField
from evacore.domain.images import Images
from evacore.domain.json_values import JsonObject
from evacore.domain.roles import EnvOverrides
from evacore.errors import EvacoreError, ProviderError
from evacore.formats.limits import MAX_MESSAGE_CHARS
from evacore.pipeline.events import Batch, EventSink
from evacore.pipeline.request import TourRequest
from evacore.pipeline.tour import Tour
from evacore.server.auth import AnyUser, Identity
from evacore.server.deps import CoreDep
from evacore.server.errors import error_response
from evacore.server.sse import DELTA_END, DELTA_START, sse_frame

router = APIRouter(tags=["generate"])


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(default="", max_length=MAX_MESSAGE_CHARS)
    images: Images = Field(default_factory=list)
    """Data URLs (`data:image/…;base64,…`), http(s) URLs or `{"url", "detail"}` objects."""


class ClientOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,57}$")
    description: str = Field(default="", max_length=4000)
    parameters: JsonObject = Field(default_factory=lambda: {"type": "object", "properties": {}})


class GenerateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: MessageBody | None = None
    mode: Literal["normal", "regenerate", "swipe", "continue", "impersonate", "quiet"] = "normal"
    stream: StrictBool = True
    env: EnvOverrides | None = None
    """Flags merged over the tour's own (booleans; honoured for the master only, §13)."""
    params: RequestParamsField = Field(default_factory=dict)
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


def tour_request(chat_id: str, body: GenerateIn, who: Identity) -> TourRequest:
    """The body of a generate request in the core's terms (checked by the door)."""
    return TourRequest(
        chat_id=chat_id, user_id=who.user_id, role=who.role, mode=body.mode,
        stream=body.stream, env=body.env,
        text=body.message.content if body.message else "",
        images=list(body.message.images) if body.message else [],
        client_ops=[op.model_dump() for op in body.client_ops],
        params=dict(body.params), prefill=body.prefill,
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
    return await answer(core, chat_id, body, who, request.receive)


async def answer(core: Core, chat_id: str, body: GenerateIn, who: Identity,
                 receive: Receive) -> Response:
    """The answer to a generate request whose body and caller are checked: the tour's
    events as SSE, its result as JSON, or the error that refused it before it began.
    `receive`: the request's ASGI receive (its body already read), to notice a client that
    goes away."""
    running = core.tours.start(tour_request(chat_id, body, who))
    tour = running.tour
    if not body.stream:
        gone = asyncio.ensure_future(client_gone(receive))
        try:
            await asyncio.wait({running.task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not running.task.done():  # nobody waits for the answer any more
                running.abort("client disconnected")
            await running.result()
        except asyncio.CancelledError:
            running.abort("client disconnected")
            raise
        finally:
            gone.cancel()
        if tour.error:
            return error_response(status_for(tour.error["code"]), tour.error["code"],
                                  tour.error["message"], tour_id=tour.id)
        return JSONResponse(result_json(tour))
    events = running.batches()
    # The first batch may be a while (stages 1-9, or the chat's earlier tour still running):
    # a client that leaves meanwhile aborts the tour, which then stores nothing it had not
    # and ends its events, so the batch is awaited right here (no task of its own, woken
    # by the tour's first event). The watch for the client's leaving goes on as the
    # stream's own (`watching`): one task for the whole answer.
    gone = asyncio.ensure_future(client_gone(receive))
    gone.add_done_callback(lambda done: done.cancelled() or running.abort("client disconnected"))
    try:
        first = await anext(events, None)
    except BaseException as failed:
        gone.cancel()
        if isinstance(failed, asyncio.CancelledError):
            running.abort("client disconnected")
        await events.aclose()
        raise
    left = gone.done()
    if left or (first is not None and first[0][0] == "error"):
        gone.cancel()
        await events.aclose()  # closed here, not left to the garbage collector's finalizer
        if left:
            return Response(status_code=499)
        # stage 1 refused the request (bad mode, empty chat…): a plain HTTP error, no stream
        code, message = first[0][1]["code"], first[0][1]["message"]
        return error_response(status_for(code), code, message, tour_id=tour.id)
    return EventStream(_stream(first, events, tour.events), {"X-Tour-Id": running.id},
                       on_gone=lambda: running.abort("client disconnected"),
                       on_end=lambda: running.abort("client disconnected"),
                       write_through=(tour.events, _frames),
                       text_frame=TextFrame(DELTA_START, DELTA_END),
                       # the first batch is in hand: the head goes out with it, in one write
                       head_with_first_chunk=True,
                       watching=gone)  # the same watch goes on through the stream


def _frames(batch: Batch) -> bytes:
    if len(batch) == 1:  # a token that came alone
        return sse_frame(*batch[0])
    return b"".join([sse_frame(name, data) for name, data in batch])


async def _stream(first: Batch | None, batches: AsyncGenerator[Batch, None], sink: EventSink
                  ) -> AsyncGenerator[bytes, None]:
    """One write per batch of queued events (a burst from the provider goes out at once);
    the tour's last batch (its sink closed with nothing left in it) ends the response in
    the same write. `batches` is closed however the stream ends (the response stops at
    that last batch, before `batches` itself ends): a generator left to the garbage
    collector costs the event loop a thread-safe wake-up and a task to close it."""
    async with aclosing(batches):
        if first is None:
            return
        yield _last_or_not(_frames(first), sink)
        async for batch in batches:
            yield _last_or_not(_frames(batch), sink)


def _last_or_not(chunk: bytes, sink: EventSink) -> bytes:
    return LastChunk(chunk) if sink.closed and not sink.queued() else chunk
