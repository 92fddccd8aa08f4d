"""The body of `POST /v1/chat/completions` in evacore's terms: the client's system texts,
its conversation (user, assistant and tool turns), what the new tour answers, and the
sampler fields as tour params.

Must not: read the database or decide which chat a conversation is (binding.py does).
Unknown fields are ignored, as OpenAI's own API does for fields it does not know of.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from evacore.agent.tools.external import check_external_tools
from evacore.channels.openai.errors import FacadeError
from evacore.errors import InvalidInput

MAX_MESSAGES = 100_000
MAX_TEXT = 1_000_000
MAX_IMAGES = 16


class ChatBody(BaseModel):
    """The fields of OpenAI's request that evacore honours (others are ignored)."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(min_length=1, max_length=600)
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: StrictBool | None = False
    stream_options: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    user: str | None = Field(default=None, max_length=512)
    n: int | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and (self.stream_options or {}).get("include_usage") is True)


def parse_body(raw: bytes) -> ChatBody:
    """The request body, or a 400 naming the field that is wrong."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise FacadeError(400, "The request body is not valid JSON.",
                          code="invalid_json") from None
    if not isinstance(data, dict):
        raise FacadeError(400, "The request body must be a JSON object.", code="invalid_json")
    try:
        body = ChatBody.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        missing = first.get("type") == "missing"
        message = (f"Missing required parameter: '{param}'." if missing
                   else f"Invalid value for '{param}': {first.get('msg', 'invalid')}.")
        raise FacadeError(400, message, code="missing_required_parameter" if missing
                          else "invalid_value", param=param) from None
    if body.n is not None and body.n != 1:
        raise FacadeError(400, f"n must be 1 (it was {body.n}): evacore answers with one "
                          "choice.",
                          code="unsupported_value", param="n")
    if isinstance(body.stop, list) and len(body.stop) > 4:
        raise FacadeError(400, "stop takes at most 4 sequences.", code="invalid_value",
                          param="stop")
    return body


class Turn(NamedTuple):
    """One user, assistant or tool message as the client sent it (or will send it back).
    A named tuple: a request resends the whole conversation, and one is made for every
    message of it (a frozen dataclass took about 2.6 times as long to make)."""

    role: str
    text: str
    images: tuple[str, ...] = ()
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    """(id, function name, arguments) of an assistant message's calls."""
    tool_call_id: str | None = None

    def key(self) -> list[Any]:
        """What matching compares: roles and text (trimmed), calls, the answered call."""
        return [self.role, self.text.strip(), [list(c) for c in self.tool_calls],
                self.tool_call_id or ""]


def _digest(keys: list[bytes]) -> str:
    """The digest of turns by their serialized keys: SHA-256 of the JSON list of the keys
    (built from the serialized keys in place: the same bytes as serializing the list)."""
    return hashlib.sha256(b"[" + b",".join(keys) + b"]").hexdigest()


@dataclass
class Conversation:
    """The request's messages split into what the chat holds and what the tour answers."""

    system: list[str]
    turns: list[Turn]
    prior: list[Turn]
    """The conversation the request goes on from (what a continued chat must hold): the
    first turns of `turns`."""
    text: str = ""
    images: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    """When the request ends with tool messages: the client's results by call id."""

    @property
    def ends_with_results(self) -> bool:
        return bool(self.results)

    @cached_property
    def _keys(self) -> list[bytes]:
        """Each turn's key, serialized once a request, however many digests its binding
        takes (four, each over the whole conversation the client resent)."""
        return [orjson.dumps(t.key()) for t in self.turns]

    @cached_property
    def _whole(self) -> str:
        return _digest(self._keys)

    def digest(self, answer: Turn | None = None, *, prior: bool = False) -> str:
        """The digest of the turns (`prior`: of the prior turns only), with `answer` after
        them when given. The turns' own digest is taken once a request (the binding's match
        and its record both need it)."""
        if answer is None and not prior:
            return self._whole
        keys = self._keys[:len(self.prior)] if prior else self._keys
        return _digest([*keys, orjson.dumps(answer.key())] if answer is not None else keys)


def _parts(content: Any, where: str) -> tuple[str, list[str]]:
    """Text and image URLs of a message's content (a string or a list of parts)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise FacadeError(400, f"Invalid value for '{where}.content': a string or a list of "
                          "content parts.", code="invalid_value", param=f"{where}.content")
    texts, images = [], []
    for part in content:
        if not isinstance(part, dict):
            raise FacadeError(400, f"Invalid content part in '{where}.content'.",
                              code="invalid_value", param=f"{where}.content")
        kind = part.get("type")
        if kind in ("text", "input_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                raise FacadeError(400, f"An image_url part in '{where}.content' needs a url.",
                                  code="invalid_value", param=f"{where}.content")
            images.append(url)
        # other part kinds (audio, files, refusals) carry nothing evacore passes on
    return "\n".join(texts), images


def _calls(raw: Any, where: str) -> tuple[tuple[str, str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FacadeError(400, f"'{where}.tool_calls' must be a list.", code="invalid_value",
                          param=f"{where}.tool_calls")
    out = []
    for i, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) \
                or not isinstance(function.get("name"), str):
            raise FacadeError(400, f"'{where}.tool_calls[{i}]' needs an id and a function "
                              "name.", code="invalid_value", param=f"{where}.tool_calls")
        args = function.get("arguments", "")
        out.append((call["id"], function["name"],
                    args if isinstance(args, str) else orjson.dumps(args).decode()))
    return tuple(out)


def parse_messages(messages: list[dict[str, Any]]) -> Conversation:
    """Split the messages; the conversation must end with a user message or with the
    results of the last assistant message's tool calls."""
    system: list[str] = []
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise FacadeError(400, f"Invalid value for '{where}.role': {role!r}; supported: "
                              "system, developer, user, assistant, tool.", code="invalid_value",
                              param=f"{where}.role")
        text, images = _parts(m.get("content"), where)
        if len(text) > MAX_TEXT:
            raise FacadeError(400, f"'{where}.content' is too long.", code="invalid_value",
                              param=f"{where}.content")
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            turns.append(Turn("user", text, tuple(images)))
        elif role == "assistant":
            turns.append(Turn("assistant", text, tool_calls=_calls(m.get("tool_calls"), where)))
        else:
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise FacadeError(400, f"Missing required parameter: '{where}.tool_call_id'.",
                                  code="missing_required_parameter",
                                  param=f"{where}.tool_call_id")
            turns.append(Turn("tool", text, tool_call_id=call_id))
    if not turns:
        raise FacadeError(400, "messages must hold at least one user message.",
                          code="invalid_value", param="messages")
    last = turns[-1]
    if last.role == "user":
        if len(last.images) > MAX_IMAGES:
            raise FacadeError(400, f"At most {MAX_IMAGES} images per message.",
                              code="invalid_value", param="messages")
        return Conversation(system, turns, turns[:-1], text=last.text, images=list(last.images))
    if last.role != "tool":
        raise FacadeError(400, "The last message must be a user message or the results of "
                          "the assistant's tool calls.", code="invalid_value", param="messages")
    k = len(turns)
    while k > 0 and turns[k - 1].role == "tool":
        k -= 1
    asked = turns[k - 1] if k > 0 else None
    ids = {c[0] for c in asked.tool_calls} if asked is not None and asked.role == "assistant" \
        else set()
    results = {}
    for t in turns[k:]:
        if t.tool_call_id not in ids:
            raise FacadeError(400, f"A tool message answers '{t.tool_call_id}', which is not a "
                              "tool call of the assistant message before it.",
                              code="invalid_value", param="messages")
        results[t.tool_call_id or ""] = t.text
    return Conversation(system, turns, turns[:k], results=results)


def external_tools(body: ChatBody) -> list[dict[str, Any]]:
    try:
        return check_external_tools(body.tools or [])
    except InvalidInput as exc:
        raise FacadeError(400, exc.message, code="invalid_value", param="tools") from None


def tour_params(body: ChatBody, max_tokens: int) -> dict[str, Any]:
    """Sampler fields as tour params; the answer's length stays within the connection's
    `max_tokens` (the prompt budget reserves exactly that much)."""
    params: dict[str, Any] = {}
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed"):
        value = getattr(body, name)
        if value is not None:
            params[name] = value
    if body.stop:
        params["stop"] = [body.stop] if isinstance(body.stop, str) else list(body.stop)
    asked = body.max_completion_tokens or body.max_tokens
    if asked is not None:
        params["max_tokens"] = min(asked, max_tokens)
    if body.tool_choice is not None and body.tools:
        params["tool_choice"] = body.tool_choice
    return params
