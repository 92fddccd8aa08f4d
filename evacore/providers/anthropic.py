"""The `anthropic` adapter: /v1/messages with a separate `system`, tool_use / tool_result
blocks, base64 images, prefill as the trailing assistant turn, and the SSE event stream.

Must not: send a field the API does not know, or prepend the prefill to deltas (the caller
does that once).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import orjson

from evacore.errors import InvalidInput, ProviderConnectionError, ProviderProtocolError
from evacore.providers._http import HTTPProvider
from evacore.providers._sse import SSEEvent, parse_json_object
from evacore.providers._tokenize import anthropic_count
from evacore.providers._transport import http_error, label
from evacore.providers._urls import join_url
from evacore.providers.base import (
    Answer,
    Connection,
    Finish,
    ProviderEvent,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    effective_max_tokens,
    effective_model,
    effective_params,
    with_params,
)

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_PARAMS = frozenset({"temperature", "top_p", "top_k", "metadata", "thinking",
                              "service_tier"})
IMAGE_MARKER = "[image]"
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "tool_use": "tool_calls", "pause_turn": "stop", "refusal": "content_filter",
           "model_context_window_exceeded": "length"}
_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401,
                 "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                 "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                 "overloaded_error": 529}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?[^,]*?;base64,(?P<data>.*)$", re.DOTALL)
_EPHEMERAL = {"type": "ephemeral"}


def anthropic_base(base: str) -> str:
    """The API root (a trailing `/v1` dropped); `base` has no query (see `anthropic_url`)."""
    url = base.strip().rstrip("/")
    return url.removesuffix("/v1")


def anthropic_url(base_url: str, path: str) -> str:
    """An endpoint below the API root; the base URL's query string is kept."""
    return join_url(base_url, path, anthropic_base)


def _image(url: str) -> dict[str, Any]:
    m = _DATA_URL.match(url)
    if m:
        source = {"type": "base64", "media_type": m["mime"] or "image/png", "data": m["data"]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any, vision: bool) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [str(content)]:
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if vision and isinstance(url, str):
                blocks.append(_image(url))
            else:
                blocks.append({"type": "text", "text": IMAGE_MARKER})
    return blocks


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments or "{}")
    except (orjson.JSONDecodeError, TypeError):
        return {"raw": str(arguments)}
    return value if isinstance(value, dict) else {"value": value}


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    return {"type": "tool_use", "id": str(call.get("id", "")),
            "name": str(function.get("name", "")), "input": _tool_input(function.get("arguments"))}


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


ZERO_WIDTH_SPACE = "\u200b"
"""What an empty text becomes (the API refuses empty text blocks; SillyTavern does the same)."""
HUMAN_SYSPROMPT_MESSAGE = ("Let's get started. Please generate your response based on the "
                           "information and instructions provided above.")
"""SillyTavern's placeholder user turn when the messages do not start with one."""


def _named(m: dict[str, Any], char_name: str, user_name: str) -> dict[str, Any]:
    """The message with its speaker written into the text as SillyTavern's conversion does
    (the API has no `name`): example turns get `{user}: ` / `{char}: `, any other named
    message `{name}: ` (never twice)."""
    name = m.get("name")
    if not isinstance(name, str) or not name:
        return m
    if m.get("role") in ("system", "developer"):
        name = {"example_user": user_name, "example_assistant": char_name}.get(name, "")
    if not name:
        return m
    prefix = f"{name}: "
    content = m.get("content")
    if isinstance(content, str):
        return {**m, "content": content if content.startswith(prefix) else prefix + content}
    if isinstance(content, list):
        parts = [dict(p) if isinstance(p, dict) else p for p in content]
        for part in parts:
            if isinstance(part, dict) and part.get("type") == "text":
                text = str(part.get("text") or "")
                part["text"] = text if text.startswith(prefix) else prefix + text
                break
        else:
            parts.insert(0, {"type": "text", "text": prefix.rstrip()})
        return {**m, "content": parts}
    return m


def serialize_messages(
    messages: list[dict[str, Any]], vision: bool, prefill: str, *, char_name: str = "",
    user_name: str = "", placeholder: str = HUMAN_SYSPROMPT_MESSAGE,
) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, messages). Leading system messages become `system`; later ones become
    user turns; speaker names go into the text; an empty text is a zero-width space;
    same-role neighbours merge (tool results gather in one user turn); a placeholder user
    turn opens the messages when they do not start with one (a system-only prompt too); the
    final assistant turn (prefill or continued message) loses its trailing whitespace (the
    API refuses it; SillyTavern trims the prefill too — the stored answer keeps it)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        m = _named(m, char_name, user_name)
        role = m.get("role")
        if role in ("system", "developer") and not out:
            system.extend(b["text"] for b in _blocks(m.get("content"), False)
                          if b["type"] == "text" and b["text"] != ZERO_WIDTH_SPACE)
        elif role in ("system", "developer", "user"):
            _append(out, "user", _blocks(m.get("content"), vision) or _empty())
        elif role == "assistant":
            blocks = [b for b in _blocks(m.get("content"), False) if b["type"] == "text"]
            blocks += [_tool_use(c) for c in m.get("tool_calls") or () if isinstance(c, dict)]
            _append(out, "assistant", blocks or _empty())
        elif role == "tool":
            content = m.get("content")
            result: Any = content if isinstance(content, str) else _blocks(content, vision)
            _append(out, "user", [{"type": "tool_result",
                                   "tool_use_id": str(m.get("tool_call_id", "")),
                                   "content": result}])
        else:
            raise InvalidInput(f"message role {role!r} is not system, user, assistant or tool")
    if prefill:
        _append(out, "assistant", [{"type": "text", "text": prefill}])
    if out and out[-1]["role"] == "assistant":
        blocks = out[-1]["content"]
        if blocks and blocks[-1]["type"] == "text":
            blocks[-1]["text"] = blocks[-1]["text"].rstrip().rstrip(ZERO_WIDTH_SPACE).rstrip()
            if not blocks[-1]["text"]:
                blocks.pop()
        if not blocks:
            out.pop()
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": placeholder}]})
    return system, out


def _empty() -> list[dict[str, Any]]:
    return [{"type": "text", "text": ZERO_WIDTH_SPACE}]


def _tool_choice(value: Any) -> Any:
    if value in ("auto", "none"):
        return {"type": value}
    if value in ("required", "any"):
        return {"type": "any"}
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        return {"type": "tool", "name": value["function"].get("name", "")}
    return value


def serialize_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidInput("a tool needs a function name")
        clean: dict[str, Any] = {"name": function["name"]}
        if function.get("description"):
            clean["description"] = function["description"]
        clean["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(clean)
    return out


def build_request_body(
    connection: Connection, request: ProviderRequest, *, stream: bool
) -> dict[str, Any]:
    """The exact JSON body sent to /v1/messages (pure)."""
    if request.messages is None:
        raise InvalidInput("anthropic needs messages (chat mode)")
    params = effective_params(connection, request)
    system, messages = serialize_messages(
        request.messages, connection.vision, request.prefill, char_name=request.char_name,
        user_name=request.user_name,
        placeholder=str(params.get("human_sysprompt_message") or HUMAN_SYSPROMPT_MESSAGE))
    body: dict[str, Any] = {"model": effective_model(connection, request),
                            "max_tokens": effective_max_tokens(connection, request)}
    cache = bool(params.get("prompt_cache"))
    if system:
        text = "\n\n".join(system)
        body["system"] = ([{"type": "text", "text": text, "cache_control": _EPHEMERAL}]
                          if cache else text)
    if cache and messages and messages[-1]["content"]:
        messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": _EPHEMERAL}
    body["messages"] = messages
    body["stream"] = stream
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.tools:
        body["tools"] = serialize_tools(request.tools)
    if "tool_choice" in params:
        body["tool_choice"] = _tool_choice(params["tool_choice"])
    return with_params(body, params, ANTHROPIC_PARAMS)


def _trailing_space(request: ProviderRequest) -> bool:
    """Whether the sent assistant turn lost trailing whitespace (the answer's start is then
    left-trimmed, so prefill + answer reads as one text)."""
    if request.prefill:
        return request.prefill[-1].isspace()
    last = (request.messages or [{}])[-1]
    content = last.get("content")
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return False
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]
        content = texts[-1] if texts else ""
    return isinstance(content, str) and content[-1:].isspace()


def _usage(raw: Any, base: Usage | None = None) -> Usage | None:
    if not isinstance(raw, dict):
        return base
    prompt = sum(raw.get(k) or 0 for k in ("input_tokens", "cache_read_input_tokens",
                                           "cache_creation_input_tokens"))
    if base is not None and not raw.get("input_tokens"):
        prompt = base.prompt_tokens
    completion = raw.get("output_tokens") or (base.completion_tokens if base else 0)
    return Usage(prompt, completion, prompt + completion)


class AnthropicProvider(HTTPProvider):
    kind = "anthropic"

    def __init__(self, connection: Connection, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._count_missing = False

    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(self.connection, request, stream=stream)

    def endpoint(self, *, stream: bool) -> str:
        return anthropic_url(self.connection.base_url, "/v1/messages")

    def headers(self, request: ProviderRequest | None, *, stream: bool) -> dict[str, str]:
        params = effective_params(self.connection, request or ProviderRequest())
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            "anthropic-version": str(params.get("anthropic_version", ANTHROPIC_VERSION)),
        }
        if self.connection.api_key:
            headers["x-api-key"] = self.connection.api_key
        extra = params.get("extra_headers")
        if isinstance(extra, dict):
            headers.update({str(k): str(v) for k, v in extra.items()})
        return headers

    def _error(self, error: Any) -> Exception:
        kind = error.get("type") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(error)
        return http_error(self.connection, _ERROR_STATUS.get(kind or "", 502),
                          f"{kind}: {message}" if kind else str(message))

    async def parse_stream(
        self, events: AsyncIterator[SSEEvent], request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        lstrip = _trailing_space(request)
        tools: dict[int, dict[str, Any]] = {}
        usage: Usage | None = None
        model: str | None = None
        stop_reason: str | None = None
        stopped = had_tools = False
        async for sse in events:
            if sse.event == "ping" or not sse.data.strip():
                continue
            payload = parse_json_object(sse.data, "stream event")
            kind = payload.get("type") or sse.event
            if kind == "message_start":
                message = payload.get("message") or {}
                model = message.get("model") or model
                usage = _usage(message.get("usage"))
            elif kind == "content_block_start":
                block = payload.get("content_block") or {}
                if block.get("type") == "tool_use":
                    tools[payload.get("index", 0)] = {"id": block.get("id", ""),
                                                      "name": block.get("name", ""), "args": []}
                elif block.get("type") == "text" and block.get("text"):
                    text = block["text"].lstrip() if lstrip else block["text"]
                    lstrip = lstrip and not text
                    if text:
                        yield TextDelta(text)
            elif kind == "content_block_delta":
                delta = payload.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    text = delta["text"].lstrip() if lstrip else delta["text"]
                    lstrip = lstrip and not text
                    if text:
                        yield TextDelta(text)
                elif delta.get("type") == "input_json_delta":
                    slot = tools.get(payload.get("index", 0))
                    if slot is not None:
                        slot["args"].append(delta.get("partial_json", ""))
                elif delta.get("type") == "thinking_delta" and delta.get("thinking"):
                    yield ReasoningDelta(delta["thinking"])
            elif kind == "content_block_stop":
                slot = tools.pop(payload.get("index", 0), None)
                if slot is not None:
                    had_tools = True
                    yield ToolCall(slot["id"], slot["name"], "".join(slot["args"]) or "{}")
            elif kind == "message_delta":
                stop_reason = (payload.get("delta") or {}).get("stop_reason") or stop_reason
                usage = _usage(payload.get("usage"), usage)
            elif kind == "message_stop":
                stopped = True
                break
            elif kind == "error":
                raise self._error(payload.get("error"))
        if not stopped and stop_reason is None:
            raise ProviderConnectionError(
                f"{label(self.connection)}: the stream ended before the answer was complete",
                retryable=True,
            )
        reason = _FINISH.get(stop_reason or "end_turn", stop_reason or "stop")
        yield Finish("tool_calls" if had_tools and reason == "stop" else reason, usage, model)

    def parse_answer(self, body: dict[str, Any], request: ProviderRequest) -> Answer:
        if body.get("type") == "error":
            raise self._error(body.get("error"))
        content = body.get("content")
        if not isinstance(content, list):
            raise ProviderProtocolError(f"{label(self.connection)}: the answer has no content")
        text, reasoning, calls = [], [], []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text.append(str(block.get("text", "")))
            elif block.get("type") == "thinking":
                reasoning.append(str(block.get("thinking", "")))
            elif block.get("type") == "tool_use":
                args = orjson.dumps(block.get("input") or {}).decode()
                calls.append(ToolCall(str(block.get("id", "")), str(block.get("name", "")), args))
        joined = "".join(text)
        reason = _FINISH.get(body.get("stop_reason") or "end_turn", body.get("stop_reason"))
        return Answer(
            text=joined.lstrip() if _trailing_space(request) else joined,
            tool_calls=calls,
            finish_reason="tool_calls" if calls and reason == "stop" else str(reason),
            usage=_usage(body.get("usage")),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            reasoning="".join(reasoning),
        )

    async def count_tokens(self, text: str) -> int | None:
        """`POST /v1/messages/count_tokens` for one user turn of `text`."""
        if self._count_missing:
            return None
        url = anthropic_url(self.connection.base_url, "/v1/messages/count_tokens")
        count, missing = await anthropic_count(
            self._client, url, self.headers(None, stream=False), self.connection, text
        )
        self._count_missing = missing
        return count
