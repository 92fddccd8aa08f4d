"""The one door into the core (R14.0): what a channel asks for, and the tour it gets back.

Every channel (HTTP generate, the OpenAI facade, Telegram, the page, the terminal) builds a
`TourRequest` and hands it to `TourManager.start`; the request is checked here, without
touching the database (stage 1 reads the chat and refuses a chat that is not the caller's).
Images, env flags and params must have the typed shapes of domain/ (images.py,
connection_params.py), whichever channel sent them.

Must not: speak any channel's protocol, read the database, or run stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import StrictBool, TypeAdapter, ValidationError

from evacore.agent.tools.client_ops import make_client_op_tools
from evacore.agent.tools.external import check_external_tools
from evacore.domain._typed import describe
from evacore.domain.connection_params import check_request_params
from evacore.domain.images import Images
from evacore.domain.roles import ENV_FLAGS, env_for_role
from evacore.errors import Forbidden, InvalidInput
from evacore.pipeline.tour import MODES, Tour


@dataclass
class TourRequest:
    """One generation a channel asks for, in the channel's neutral terms."""

    chat_id: str
    user_id: str | None
    role: str
    text: str = ""
    images: list[Any] = field(default_factory=list)
    mode: str = "normal"
    stream: bool = True
    env: Mapping[str, bool] | None = None
    """Environment overrides asked for by the caller: honoured for the master only (R8.3)."""
    channel_env: Mapping[str, bool] | None = None
    """Flags the channel itself vouches for (Telegram sets `telegram`), whatever the role."""
    client_ops: list[dict[str, Any]] = field(default_factory=list)
    """Operations the client offers on its own machine (R9.2): name, description, parameters."""
    params: dict[str, Any] = field(default_factory=dict)
    prefill: str | None = None
    system: list[str] = field(default_factory=list)
    """Extra system texts placed after the character's system prompt, protected, never
    stored as chat messages (the facade's client system/developer messages)."""
    external_tools: list[dict[str, Any]] = field(default_factory=list)
    """Tools the client declares and runs itself (OpenAI function tools). A call of one ends
    the response after evacore's own calls of that answer have run."""
    resume: bool = False
    """Answer from the end of the chat without a new user message (a normal turn whose
    input is the tool results the client stored on the last answer)."""


def step_limit(asked: Any, limit: int) -> int:
    """A request's `params.max_steps`: a positive integer that may lower `agent.max_steps`
    for this tour, never raise it (R5.1)."""
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        raise InvalidInput("params.max_steps must be a positive integer")
    return min(asked, limit)


_IMAGES = TypeAdapter(Images)
_ENV = TypeAdapter(dict[str, StrictBool])  # which flags exist is checked below


def _check_typed(request: TourRequest) -> None:
    """Images, env flags and params in their typed shapes (domain/), whichever channel sent
    them; the HTTP body models check the same shapes before a request gets here."""
    for where, check in (("message.images", lambda: _IMAGES.validate_python(request.images)),
                         ("env", lambda: _ENV.validate_python(dict(request.env or {}))),
                         ("channel_env", lambda: _ENV.validate_python(
                             dict(request.channel_env or {}))),
                         ("params", lambda: check_request_params(request.params))):
        try:
            check()
        except ValidationError as exc:
            raise InvalidInput(describe(exc, where=where)) from None
        except ValueError as exc:
            raise InvalidInput(f"{where}: {exc}") from None


@dataclass
class CheckedRequest:
    """What `check_request` read from a request, ready for its tour."""

    env: dict[str, bool]
    overrides: dict[str, bool] | None
    images: list[Any]
    client_ops: list[dict[str, Any]]
    external_tools: list[dict[str, Any]]
    params: dict[str, Any]


def tour_for(request: TourRequest, *, max_steps: int,
             checked: CheckedRequest | None = None) -> Tour:
    """The tour a request asks for; invalid requests raise `InvalidInput` (a 422), client ops
    from anyone but the master `Forbidden` (a 403). `checked`: this same request's
    `check_request`, when its channel made it already."""
    c = checked if checked is not None else check_request(request, max_steps=max_steps)
    tour = Tour(
        chat_id=request.chat_id, user_id=request.user_id, role=request.role,
        mode=request.mode, stream=request.stream, env=c.env, env_overrides=c.overrides,
        input_text=request.text, input_images=c.images, params=c.params,
        client_ops=c.client_ops, external_tools=c.external_tools,
    )
    if request.system:
        tour.data["client_system"] = [str(s) for s in request.system]
    return tour


def check_request(request: TourRequest, *, max_steps: int) -> CheckedRequest:
    """Everything `tour_for` refuses a request for, without making its tour: a channel that
    must write something before it starts the tour (a chat) checks first."""
    if request.mode not in MODES:
        raise InvalidInput(f"unknown mode {request.mode!r}; known: {', '.join(MODES)}")
    if "\x00" in request.text or "\x00" in request.chat_id or any(
            "\x00" in str(s) for s in request.system or ()):
        # no database of evacore's may hold it everywhere (PostgreSQL refuses it)
        raise InvalidInput("the message must not contain NUL characters (U+0000)")
    _check_typed(request)
    if request.client_ops and request.role != "master":
        raise Forbidden("only the master's tours may declare client ops: they run on the "
                        "master's own machine")
    if request.client_ops and not request.stream:
        raise InvalidInput("client ops need \"stream\": true: the client learns each call's id "
                           "from the stream's client_op events")
    images = list(request.images)
    env = env_for_role(request.role)
    env["client_ops"] = bool(request.client_ops)
    env["picture"] = bool(images)
    for flags in (request.channel_env, request.env):
        unknown = set(flags or ()) - set(ENV_FLAGS)
        if unknown:
            raise InvalidInput(f"unknown env flags: {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(ENV_FLAGS)}")
    if request.channel_env:
        env.update({k: bool(v) for k, v in request.channel_env.items()})
    overrides = None
    if request.env and request.role == "master":
        overrides = {k: bool(v) for k, v in request.env.items()}
        env.update(overrides)
    if request.resume and (request.mode != "normal" or request.text or images):
        raise InvalidInput("resume is a normal turn without a new message")
    if request.mode == "normal" and not (request.text or images or request.resume):
        raise InvalidInput("message.content is required in normal mode")
    client_ops = [dict(op) for op in request.client_ops]
    make_client_op_tools(client_ops)  # a malformed declaration is a 422 before the tour starts
    external_tools = check_external_tools(list(request.external_tools))
    params = dict(request.params)
    if "max_steps" in params:
        params["max_steps"] = step_limit(params["max_steps"], max_steps)
    if request.prefill is not None:
        params["prefill"] = request.prefill
    return CheckedRequest(env, overrides, images, client_ops, external_tools, params)
