"""`GET /v1/models` and `POST /v1/chat/completions` (R14.1): OpenAI's protocol onto the
core's one door. Every answer carries `X-Evacore-Chat` and `X-Evacore-Tour`.

Must not: answer in any envelope but OpenAI's on these routes (401s and malformed bodies
included), or let a tour outlive its client: a client that disconnects aborts the tour at
once, which closes the upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from evacore.channels.event_stream import EventStream, LastChunk, client_gone
from evacore.channels.openai import binding
from evacore.channels.openai.chunks import ChunkWriter, completion
from evacore.channels.openai.conversation import (
    ChatBody,
    Conversation,
    Turn,
    external_tools,
    parse_body,
    parse_messages,
    tour_params,
)
from evacore.channels.openai.errors import FacadeError, error_line, from_code, from_evacore
from evacore.channels.openai.models import Target, list_models, resolve
from evacore.domain.roles import Identity
from evacore.errors import EvacoreError
from evacore.logs import get_logger
from evacore.pipeline.events import Batch
from evacore.pipeline.manager import RunningTour
from evacore.pipeline.request import CheckedRequest, TourRequest, check_request, tour_for
from evacore.pipeline.tour import Tour
from evacore.store.db import refuses_nul
from evacore.store.lean import transact
from evacore.store.users import identify

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

log = get_logger(__name__)
CHAT_HEADER = "X-Evacore-Chat"
TOUR_HEADER = "X-Evacore-Tour"


class OpenAIRoute(APIRoute):
    """A route whose every failure, FastAPI's own included, is OpenAI's error envelope."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await in_openai_terms(handle(request))

        return handler


async def in_openai_terms(answering: Awaitable[Response]) -> Response:
    """The answer, or the failure that came instead in OpenAI's error envelope."""
    try:
        return await answering
    except FacadeError as exc:
        return exc.response()
    except EvacoreError as exc:
        return from_evacore(exc).response()
    except RequestValidationError as exc:
        return FacadeError(400, f"Invalid request: {exc.errors()[:1]}",
                           code="invalid_value").response()
    except HTTPException as exc:
        return FacadeError(exc.status_code, str(exc.detail)).response()
    except ClientDisconnect:  # gone while its body was read (or cut at the body limit)
        return Response(status_code=499)
    except Exception as exc:
        if refuses_nul(exc):
            return FacadeError(400, "Text in the request must not contain NUL characters "
                               "(U+0000).", code="invalid_value", param="messages").response()
        log.exception("openai.crashed")
        return FacadeError(500, "The server had an error while processing the request.",
                           code="internal", type="server_error").response()


router = APIRouter(route_class=OpenAIRoute, tags=["openai"])


async def authenticate(request: Request) -> Identity:
    """The caller from `Authorization: Bearer <evacore token>` (401 in OpenAI's envelope)."""
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise FacadeError(401, "You didn't provide an API key. Send your evacore token as "
                          "`Authorization: Bearer <token>`.", code="missing_api_key")
    core = request.app.state.core
    who = await identify(core.session, core.token_cache, token)
    if who is None:
        raise FacadeError(401, "Incorrect API key provided: the evacore token is not valid.",
                          code="invalid_api_key")
    return who


@router.get("/models")
async def models(request: Request) -> Response:
    """The characters (`<name>`) and connections (`@<name>`) a request may name as `model`."""
    await authenticate(request)
    async with request.app.state.core.session() as s:
        data = await list_models(s)
    return Response(orjson.dumps({"object": "list", "data": data}),
                    media_type="application/json")


@router.get("/models/{model:path}")
async def model(request: Request, model: str) -> Response:
    """One model as `GET /v1/models` lists it (`<char>@<connection>` too, with the
    character's time); unknown → 404 `model_not_found`."""
    await authenticate(request)
    async with request.app.state.core.session() as s:
        await resolve(s, model)
        listed = {entry["id"].casefold(): entry for entry in await list_models(s)}
    entry = listed.get(model.casefold()) or listed.get(model.partition("@")[0].casefold())
    created = entry["created"] if entry is not None else 0
    return Response(orjson.dumps({"id": model, "object": "model", "created": created,
                                  "owned_by": "evacore"}), media_type="application/json")


@router.api_route("/models", methods=["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
                  include_in_schema=False)
@router.api_route("/models/{model:path}", methods=["POST", "PUT", "PATCH", "DELETE", "HEAD",
                                                   "OPTIONS"], include_in_schema=False)
@router.api_route("/chat/completions", methods=["GET", "PUT", "PATCH", "DELETE", "HEAD",
                                                "OPTIONS"], include_in_schema=False)
async def wrong_method(request: Request) -> Response:
    raise FacadeError(405, f"{request.method} is not allowed on {request.url.path}.",
                      code="method_not_allowed")


@router.post("/chat/completions", openapi_extra={"requestBody": {
    "required": True, "content": {"application/json": {"schema": ChatBody.model_json_schema()}}}})
async def chat_completions(request: Request) -> Response:
    """OpenAI's chat completion, answered by a character through the whole pipeline."""
    who = await authenticate(request)
    core = request.app.state.core
    body = parse_body(await request.body())
    conv = parse_messages(body.messages)
    tools = external_tools(body)
    named = (request.headers.get(CHAT_HEADER) or "").strip() or None

    def tour_request(plan: binding.Plan, target: Target) -> TourRequest:
        return TourRequest(
            chat_id=plan.chat_id, user_id=who.user_id, role=who.role, text=plan.text,
            images=plan.images, mode=plan.mode, stream=bool(body.stream),
            params=tour_params(body, target.max_tokens), system=conv.system,
            external_tools=tools, resume=plan.resume)

    max_steps = core.settings.agent.max_steps

    async def bind(s: Any) -> tuple[Target, binding.Plan, CheckedRequest | None]:
        target = await resolve(s, body.model)
        # what the tour would refuse, refused before a chat is made for it (an EvacoreError,
        # answered in OpenAI's terms by `in_openai_terms`)
        turn = binding.Plan("", "", resume=conv.ends_with_results)
        if not turn.resume:
            turn.text, turn.images = conv.text, list(conv.images)
        checked = check_request(tour_request(turn, target), max_steps=max_steps)
        plan = await binding.plan_for(s, who, target, conv, named=named, end_user=body.user)
        # the tour's own request differs from the one checked only by its chat (a new one,
        # or the named one) unless the plan made it a regenerate or a resume: then its check
        # is this one, and is not made twice
        same = ((plan.mode, plan.text, plan.images, plan.resume)
                == (turn.mode, turn.text, turn.images, turn.resume)
                and "\x00" not in plan.chat_id)
        return target, plan, checked if same else None

    target, plan, checked = await transact(core.db, bind)
    try:
        running = core.tours.start(tour_for(tour_request(plan, target), max_steps=max_steps,
                                            checked=checked), now=False)
    except EvacoreError as exc:
        return from_evacore(exc).response({CHAT_HEADER: plan.chat_id})
    running.tour.diagnostics["openai"] = {"model": body.model, "binding": plan.how}
    answer = Answer(core, plan, conv, running, body, frozenset(
        t["function"]["name"] for t in tools))
    running.step_now()  # the binding's save hook is on the tour now
    if not body.stream:
        return await answer.whole(request)
    return await answer.stream(request)


class Answer:
    """One request's answer: the tour's events in OpenAI's shape, and the binding after it."""

    def __init__(self, core: Any, plan: binding.Plan, conv: Conversation,
                 running: RunningTour, body: ChatBody, external: frozenset[str]) -> None:
        self.core, self.plan, self.conv, self.running = core, plan, conv, running
        self.external = external
        self.headers = {CHAT_HEADER: plan.chat_id, TOUR_HEADER: running.id}
        self.writer = ChunkWriter(completion_id=f"chatcmpl-{running.id}", model=body.model,
                                  include_usage=body.include_usage, external=external)
        self.model = body.model
        self.streaming = bool(body.stream)
        self.recorded = False
        self.saved_turn: Turn | None = None
        """The answer the binding was written with, with the tour's answer
        (`_bind_with_answer`)."""
        running.tour.save_hooks.append(self._bind_with_answer)

    async def _bind_with_answer(self, s: AsyncSession, tour: Tour) -> None:
        """Stage 14: the binding goes into the answer's own transaction, for the answer the
        client is getting: what the writer framed and what still waits for it (streamed), or
        the whole answer. `remember` writes it again only if what the client got differs."""
        if tour.status != "completed":
            return
        if self.streaming:
            content, calls = self.writer.seen_with(tour.events.queued())
        else:
            content, calls = answer_of(tour)
        turn = turn_of(content, calls)
        await binding.record_in(s, self.plan, self.conv, binding.seen_digest(self.conv, turn))
        self.saved_turn = turn

    async def remember(self, answer: Turn | None) -> None:
        if self.recorded:
            return
        self.recorded = True
        tour = self.running.tour
        if (self.saved_turn is not None and "save_problem" not in tour.diagnostics
                and tour.data.get("saved") is not None
                and answer is not None and self.saved_turn.key() == answer.key()):
            return  # written with the answer, and what the client got is what it says
        await binding.record(self.core, self.plan, self.conv, answer)

    def remember_later(self) -> None:
        """After a client left: the binding is written once the tour has saved what it had."""
        if self.recorded:
            return
        self.recorded = True

        async def later() -> None:
            with contextlib.suppress(Exception):
                await self.running.result()
            try:
                await binding.record(self.core, self.plan, self.conv, None)
            except Exception:
                log.warning("openai.binding_failed", exc_info=True)

        task = asyncio.get_running_loop().create_task(later())
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)

    async def whole(self, request: Request) -> Response:
        gone = asyncio.ensure_future(client_gone(request.receive))
        try:
            await asyncio.wait({self.running.task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not self.running.task.done():  # nobody waits for the answer any more
                self.running.abort("client disconnected")
                self.remember_later()
            tour = await self.running.result()
        except asyncio.CancelledError:
            self.running.abort("client disconnected")
            self.remember_later()
            raise
        finally:
            gone.cancel()
        if tour.error:
            await self.remember(None)
            return from_code(tour.error["code"], tour.error["message"]).response(self.headers)
        content, calls = answer_of(tour)
        await self.remember(turn_of(content, calls))
        body = completion(completion_id=f"chatcmpl-{tour.id}", model=self.model,
                          content=content, tool_calls=calls, reason=tour.finish_reason,
                          usage=tour.usage)
        return Response(orjson.dumps(body), media_type="application/json", headers=self.headers)

    async def stream(self, request: Request) -> Response:
        """The stream's head goes out with the first chunk the client gets, whoever writes
        it (the network read that brought the token, the tour's task, or these frames): a
        failure before it is a plain HTTP error (OpenAI's envelope), after it one error
        line and `[DONE]`. A client that leaves aborts the tour at once."""
        return EventStream(self._frames(self.running.batches()), self.headers,
                           on_gone=lambda: self.running.abort("client disconnected"),
                           on_end=self._ended,
                           write_through=(self.running.tour.events, self.writer.events),
                           head_with_first_chunk=True, text_frame=self.writer.text_frame)

    def _ended(self) -> None:
        """However the stream ends (finished, client gone, the server cancelled it), a tour
        still running then is aborted at once."""
        if not self.running.task.done():
            self.running.abort("client disconnected")
        self.remember_later()

    async def _frames(self, events: AsyncGenerator[Batch, None]
                      ) -> AsyncGenerator[bytes | Response, None]:
        async with contextlib.aclosing(events):  # closed however the frames end
            async for batch in events:
                chunk = self.writer.events(batch)
                failed = next((d for n, d in batch if n == "error"), None)
                if failed is not None:
                    if not self.writer.started:  # nothing sent yet: a plain HTTP error
                        await self.running.result()
                        await self.remember(None)
                        yield from_code(failed["code"], failed["message"]).response(self.headers)
                        return
                    await self.remember(None)
                    ended = error_line(from_code(failed["code"], failed["message"]))
                    yield LastChunk(chunk + ended)
                    return
                if chunk:
                    yield chunk
            tour = await self.running.result()
            if tour.error:  # ended without an error event (not expected): still say so
                await self.remember(None)
                yield LastChunk(error_line(from_code(tour.error["code"], tour.error["message"])))
                return
            await self.remember(turn_of(self.writer.content, self.writer.tool_calls))
            yield LastChunk(self.writer.finish(tour.finish_reason, tour.usage))


_LATER: set[asyncio.Task[None]] = set()


def answer_of(tour: Tour) -> tuple[str, list[dict[str, Any]]]:
    """The text the client gets (every kept step's text, the last as post-processed) and the
    calls of its own tools that end the answer."""
    if not tour.steps:
        return tour.answer, []
    last = tour.steps[-1]
    before = "".join(step.text for step in tour.steps[:-1])
    if last.tool_calls:
        calls = [c for c in last.tool_calls if c.get("external")]
        return before + last.text, calls if tour.finish_reason == "tool_calls" else []
    return before + tour.answer, []


def turn_of(content: str, calls: list[dict[str, Any]]) -> Turn:
    return Turn("assistant", content,
                tool_calls=tuple((c["id"], c["name"], c.get("arguments") or "") for c in calls))
