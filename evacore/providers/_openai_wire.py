"""What /v1/chat/completions and /v1/completions share: URLs, headers, usage, finish
reasons, tool-call fragment assembly, in-stream errors and the SSE chunk loop.

Must not: build request bodies (openai_chat.py and openai_text.py do).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from evacore.errors import ProviderConnectionError, ProviderHTTPError
from evacore.providers._chunk_template import templated
from evacore.providers._fast_lane import FastLane
from evacore.providers._sse import SSEEvent, parse_json_object
from evacore.providers._transport import http_error, label
from evacore.providers._urls import join_url
from evacore.providers.base import (
    Connection,
    Finish,
    ProviderEvent,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
)

# adapter switches read from params; never sent
CONTROL_PARAMS = frozenset({
    "prefill_as_assistant", "assistant_prefix", "stream_usage", "max_tokens_field",
    "extra_body", "extra_headers",
})

# samplers that OpenAI-compatible servers (vLLM, llama.cpp, TabbyAPI, Ollama, OpenRouter…)
# accept beyond OpenAI's own set
COMPAT_SAMPLERS = frozenset({
    "top_k", "min_p", "top_a", "typical_p", "tfs_z", "repetition_penalty",
    "repeat_penalty", "repeat_last_n", "min_tokens", "ignore_eos", "mirostat",
    "mirostat_tau", "mirostat_eta", "dry_multiplier", "dry_base", "dry_allowed_length",
    "xtc_threshold", "xtc_probability", "grammar", "json_schema", "cache_prompt",
    "n_probs", "chat_template_kwargs", "skip_special_tokens", "include_reasoning",
    "reasoning", "provider", "transforms",
})

_FINISH = {"function_call": "tool_calls", "eos": "stop", "eos_token": "stop"}


@functools.lru_cache(maxsize=256)
def openai_base(base: str) -> str:
    """`http://host:8080` gets `/v1`; a URL with a path (`…/api/v1`, `…/openai/v1`) is kept.
    `base` has no query (see `openai_url`). Remembered: every request asks for its base."""
    url = base.strip().rstrip("/")
    if httpx.URL(url).path in ("", "/"):
        url += "/v1"
    return url


def server_root(base: str) -> str:
    """The server root for llama.cpp-style side endpoints (`/tokenize`)."""
    return openai_base(base).removesuffix("/v1")


def openai_url(base_url: str, path: str) -> str:
    """An endpoint below the `/v1` base; the base URL's query string is kept."""
    return join_url(base_url, path, openai_base)


def server_url(base_url: str, path: str) -> str:
    """A side endpoint below the server root; the base URL's query string is kept."""
    return join_url(base_url, path, server_root)


def openai_headers(conn: Connection, params: dict[str, Any], *, stream: bool) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
    }
    if conn.api_key:
        headers["Authorization"] = f"Bearer {conn.api_key}"
    extra = params.get("extra_headers")
    if isinstance(extra, dict):
        headers.update({str(k): str(v) for k, v in extra.items()})
    return headers


def usage_from(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    total = raw.get("total_tokens")
    return Usage(prompt, completion, total if isinstance(total, int) else prompt + completion)


def normalise_finish(reason: Any, had_tool_calls: bool) -> str:
    result = _FINISH.get(reason, reason) if isinstance(reason, str) and reason else "stop"
    if had_tool_calls and result == "stop":
        return "tool_calls"
    return result


def stream_error(conn: Connection, error: Any) -> ProviderHTTPError:
    """An `{"error": {...}}` object sent inside a stream (OpenRouter, vLLM, llama.cpp)."""
    if isinstance(error, dict):
        message = str(error.get("message") or error)
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 502
    else:
        message, status = str(error), 502
    return http_error(conn, status, message)


class ToolCallAssembler:
    """Joins `delta.tool_calls[i]` fragments (index, id, function.name, arguments pieces)."""

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, Any]] = {}
        self._by_id: dict[str, int] = {}
        self.emitted = 0

    def add(self, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            return
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) else None
        index = fragment.get("index")
        if not isinstance(index, int):
            if call_id is not None and call_id in self._by_id:
                index = self._by_id[call_id]
            else:
                index = max(self._slots, default=-1) + 1
        slot = self._slots.setdefault(index, {"id": None, "name": "", "args": []})
        if call_id and not slot["id"]:
            slot["id"] = call_id
            self._by_id[call_id] = index
        function = fragment.get("function") or {}
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and function["name"] and not slot["name"]:
                slot["name"] = function["name"]
            args = function.get("arguments")
            if isinstance(args, str):
                slot["args"].append(args)
            elif isinstance(args, dict):
                slot["args"].append(orjson.dumps(args).decode())

    def drain(self) -> list[ToolCall]:
        calls = []
        for index in sorted(self._slots):
            slot = self._slots[index]
            call_id = slot["id"] or f"call_{self.emitted}"
            calls.append(ToolCall(call_id, slot["name"], "".join(slot["args"])))
            self.emitted += 1
        self._slots.clear()
        self._by_id.clear()
        return calls


def message_tool_calls(raw: Any) -> list[ToolCall]:
    """`message.tool_calls` of a non-stream chat answer."""
    assembler = ToolCallAssembler()
    for i, call in enumerate(raw if isinstance(raw, list) else []):
        if isinstance(call, dict):
            assembler.add({**call, "index": i})
    return assembler.drain()


async def parse_openai_stream(
    events: AsyncIterator[SSEEvent], conn: Connection, *, chat: bool,
    lane: FastLane | None = None,
) -> AsyncIterator[ProviderEvent]:
    """`data: {chunk}` … `data: [DONE]` into events; tool calls are emitted when complete.
    The `lane` (the fast lane of the same stream) is told each model name seen."""
    tools = ToolCallAssembler()
    finish: Any = None
    usage: Usage | None = None
    model: str | None = None
    done = False
    async for sse in events:
        data = sse.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            chunk = parse_json_object(data, "stream event")  # raises the protocol error
        if chunk.get("error"):
            raise stream_error(conn, chunk["error"])
        name = chunk.get("model")
        if name and isinstance(name, str):
            model = name
            if lane is not None:
                lane.model = name
        raw_usage = chunk.get("usage")
        if raw_usage is not None:
            usage = usage_from(raw_usage) or usage
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            if chat:
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    yield ReasoningDelta(reasoning)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    yield TextDelta(content)
                for fragment in delta.get("tool_calls") or ():
                    tools.add(fragment)
            else:
                text = choice.get("text")
                if isinstance(text, str) and text:
                    yield TextDelta(text)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
                for call in tools.drain():
                    yield call
    if not done and finish is None:
        raise ProviderConnectionError(
            f"{label(conn)}: the stream ended before the answer was complete", retryable=True
        )
    for call in tools.drain():
        yield call
    if model is None and lane is not None:
        model = lane.model  # named only in chunks the fast lane took
    yield Finish(normalise_finish(finish, tools.emitted > 0), usage, model)


def _fast_choice(data: str, lane: FastLane) -> dict[str, Any] | None:
    """The one choice of a chunk that changes nothing but adds text (no usage, error,
    finish, tool call or reasoning, the model the ordinary path saw last or the stream's
    first), else None."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(chunk) is not dict or chunk.get("error") or chunk.get("usage") is not None:
        return None
    name = chunk.get("model")
    if name and name != lane.model:
        if lane.model is not None or type(name) is not str:
            return None  # the ordinary path reads a change of model (or an odd name)
        lane.model = name  # the stream's first name, taken here (the answer's `Finish` reads it)
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if (type(choice) is not dict or choice.get("index", 0) not in (0, None)
            or choice.get("finish_reason")):
        return None
    return choice


def _chat_text(data: str, lane: FastLane) -> str | None:
    """A chat chunk's content when that is all it brings (the fast lane's whole parse)."""
    choice = _fast_choice(data, lane)
    if choice is None:
        return None
    delta = choice.get("delta")
    if (type(delta) is not dict or delta.get("tool_calls") or delta.get("reasoning_content")
            or delta.get("reasoning")):
        return None
    content = delta.get("content")
    return content if type(content) is str and content else None


def _completion_text(data: str, lane: FastLane) -> str | None:
    """A completions chunk's text when that is all it brings (the fast lane's whole parse)."""
    choice = _fast_choice(data, lane)
    if choice is None:
        return None
    text = choice.get("text")
    return text if type(text) is str and text else None


fast_chat_text = templated(_chat_text)
"""A chat chunk's content when that is all it brings (the fast lane's parse)."""
fast_completion_text = templated(_completion_text)
"""A completions chunk's text when that is all it brings (the fast lane's parse)."""
