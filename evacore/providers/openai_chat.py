"""The `openai-chat` adapter: /v1/chat/completions (OpenAI, OpenRouter, vLLM, llama.cpp,
Ollama, LM Studio, KoboldCpp, TabbyAPI, DeepSeek, Mistral, Groq…), streaming, tools, images.

Must not: send a field the API does not know, or prepend the prefill to deltas (the caller
does that once).
"""

from __future__ import annotations

import operator
import re
from typing import Any

import orjson

from evacore.errors import InvalidInput
from evacore.providers._openai_base import OpenAICompatibleProvider
from evacore.providers._openai_wire import (
    COMPAT_SAMPLERS,
    message_tool_calls,
    normalise_finish,
    usage_from,
)
from evacore.providers.base import (
    Answer,
    Connection,
    ProviderRequest,
    effective_max_tokens,
    effective_model,
    effective_params,
    with_params,
)

CHAT_PARAMS = frozenset({
    "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "logit_bias",
    "logprobs", "top_logprobs", "response_format", "tool_choice", "parallel_tool_calls",
    "user", "reasoning_effort", "service_tier", "metadata", "store", "verbosity",
}) | COMPAT_SAMPLERS

IMAGE_MARKER = "[image]"
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_-]")
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
"""Roles whose message of a text content and nothing else is sent as it is."""


def _content(content: Any, vision: bool) -> Any:
    """Text stays text; image parts pass only on vision connections, else become a marker."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if vision and isinstance(url, str):
                clean: dict[str, Any] = {"url": url}
                if isinstance(image, dict) and image.get("detail"):
                    clean["detail"] = image["detail"]
                parts.append({"type": "image_url", "image_url": clean})
            else:
                parts.append({"type": "text", "text": IMAGE_MARKER})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """Accepts the OpenAI shape or the flat stored shape {id, name, arguments}."""
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    args = function.get("arguments", "")
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {"name": str(function.get("name", "")),
                     "arguments": args if isinstance(args, str) else orjson.dumps(args).decode()},
    }


def serialize_messages(messages: list[dict[str, Any]], vision: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if type(content) is str and len(m) == 2 and role in _PLAIN_ROLES:
            # the usual message goes in as it is, the same dict: a request body is read,
            # never changed, and a copy would be one more of every message a streaming
            # tour holds
            out.append(m if type(m) is dict else {"role": role, "content": content})
            continue
        if role not in _ROLES:
            raise InvalidInput(f"message role {role!r} is not one of {sorted(_ROLES)}")
        msg: dict[str, Any] = {"role": role, "content": _content(content, vision)}
        name = m.get("name")
        if name and role != "tool":
            clean = _NAME_BAD.sub("_", str(name))[:64]
            if clean:
                msg["name"] = clean
        if role == "assistant" and m.get("tool_calls"):
            msg["tool_calls"] = [_tool_call(c) for c in m["tool_calls"] if isinstance(c, dict)]
        if role == "tool":
            msg["tool_call_id"] = str(m.get("tool_call_id", ""))
            if msg["content"] is None:
                msg["content"] = ""
        if msg["content"] is None and role != "assistant":
            msg["content"] = ""
        out.append(msg)
    return out


_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})


_IN_SHAPE: dict[tuple[int, ...], list[dict[str, Any]]] = {}
"""Tool lists found already in the API's shape, by the ids of their tools (the list kept, so
no id is reused meanwhile): the same registered tools are offered tour after tour."""
_IN_SHAPE_KEPT = 64


def serialize_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools in the API's shape; a tool already in it (a registered tool's schema, the
    same object every tour) goes in as it is, not copied."""
    key = tuple(map(id, tools))
    known = _IN_SHAPE.get(key)
    if known is not None and all(map(operator.is_, known, tools)):
        return list(tools)
    out = _serialized(tools)
    if all(map(operator.is_, out, tools)):
        if len(_IN_SHAPE) >= _IN_SHAPE_KEPT:
            _IN_SHAPE.clear()
        _IN_SHAPE[key] = list(tools)
    return out


def _serialized(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        if (len(tool) == 2 and tool.get("type") == "function" and isinstance(function, dict)
                and isinstance(function.get("name"), str) and function.keys() <= _FUNCTION_KEYS):
            out.append(tool)
            continue
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidInput("a tool needs a function name")
        clean: dict[str, Any] = {"name": function["name"]}
        for key in ("description", "parameters", "strict"):
            if key in function:
                clean[key] = function[key]
        out.append({"type": "function", "function": clean})
    return out


def build_request_body(
    connection: Connection, request: ProviderRequest, *, stream: bool
) -> dict[str, Any]:
    """The exact JSON body sent to /chat/completions (pure)."""
    if request.messages is None:
        raise InvalidInput("openai-chat needs messages (chat mode)")
    params = effective_params(connection, request)
    messages = serialize_messages(request.messages, connection.vision)
    if request.prefill and params.get("prefill_as_assistant", True):
        prefill: dict[str, Any] = {"role": "assistant", "content": request.prefill}
        if params.get("assistant_prefix"):
            prefill["prefix"] = True  # DeepSeek / Mistral continue-the-prefix flag
        messages.append(prefill)
    body: dict[str, Any] = {}
    model = effective_model(connection, request)
    if model:
        body["model"] = model
    body["messages"] = messages
    body["stream"] = stream
    if stream and params.get("stream_usage", True):
        body["stream_options"] = {"include_usage": True}
    field = params.get("max_tokens_field", "max_tokens")
    if field not in ("max_tokens", "max_completion_tokens"):
        raise InvalidInput("max_tokens_field must be max_tokens or max_completion_tokens")
    body[field] = effective_max_tokens(connection, request)
    if request.stop:
        body["stop"] = list(request.stop)
    if request.tools:
        body["tools"] = serialize_tools(request.tools)
    return with_params(body, params, CHAT_PARAMS)


class OpenAIChatProvider(OpenAICompatibleProvider):
    kind = "openai-chat"
    path = "/chat/completions"
    chat = True

    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(self.connection, request, stream=stream)

    def parse_answer(self, body: dict[str, Any], request: ProviderRequest) -> Answer:
        choice = self.first_choice(body)
        message = choice.get("message") or {}
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        calls = message_tool_calls(message.get("tool_calls"))
        return Answer(
            text=content if isinstance(content, str) else "",
            tool_calls=calls,
            finish_reason=normalise_finish(choice.get("finish_reason"), bool(calls)),
            usage=usage_from(body.get("usage")),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            reasoning=reasoning if isinstance(reasoning, str) else "",
        )
