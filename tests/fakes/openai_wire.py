"""The fake's OpenAI wire: /v1/chat/completions and /v1/completions, stream and not, with
tool-call fragments split across chunks and the final usage chunk.

Must not: decide what to answer (the Script does).
"""

from __future__ import annotations

from typing import Any

from tests.fakes._frames import Frame, fake_tokens, request_text, split3, sse
from tests.fakes.script import Reply


def _usage(reply: Reply, body: Any) -> dict[str, int]:
    prompt = fake_tokens(request_text(body))
    completion = fake_tokens(reply.text) + sum(fake_tokens(c.arguments) for c in reply.tool_calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _call_id(reply: Reply, i: int) -> str:
    return reply.tool_calls[i].id or f"call_fake_{i}"


def chat_frames(reply: Reply, body: Any) -> list[Frame]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
            "model": reply.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    frames = [Frame(chunk({"role": "assistant", "content": ""}))]
    if reply.reasoning:
        frames.append(Frame(chunk({"reasoning_content": reply.reasoning}), delta=True))
    frames += [Frame(chunk({"content": piece}), delta=True) for piece in reply.pieces()]
    for i, call in enumerate(reply.tool_calls):
        head = {"index": i, "id": _call_id(reply, i), "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        frames.append(Frame(chunk({"tool_calls": [head]}), delta=True))
        for piece in split3(call.arguments):
            frag = {"index": i, "function": {"arguments": piece}}
            frames.append(Frame(chunk({"tool_calls": [frag]}), delta=True))
    frames.append(Frame(chunk({}, reply.finish())))
    if (body.get("stream_options") or {}).get("include_usage") and reply.usage:
        frames.append(Frame(sse({**base, "choices": [], "usage": _usage(reply, body)})))
    frames.append(Frame("data: [DONE]\n\n"))
    return frames


def text_frames(reply: Reply, body: Any) -> list[Frame]:
    base = {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": reply.model}

    def chunk(text: str, finish: str | None = None) -> str:
        return sse({**base, "choices": [{"index": 0, "text": text, "finish_reason": finish}]})

    frames = [Frame(chunk(piece), delta=True) for piece in reply.pieces()]
    frames.append(Frame(chunk("", reply.finish())))
    if (body.get("stream_options") or {}).get("include_usage") and reply.usage:
        frames.append(Frame(sse({**base, "choices": [], "usage": _usage(reply, body)})))
    frames.append(Frame("data: [DONE]\n\n"))
    return frames


def chat_whole(reply: Reply, body: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(reply, i), "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(reply.tool_calls)
        ]
    out = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
           "model": reply.model,
           "choices": [{"index": 0, "message": message, "finish_reason": reply.finish()}]}
    if reply.usage:
        out["usage"] = _usage(reply, body)
    return out


def text_whole(reply: Reply, body: Any) -> dict[str, Any]:
    out = {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": reply.model,
           "choices": [{"index": 0, "text": reply.text, "finish_reason": reply.finish()}]}
    if reply.usage:
        out["usage"] = _usage(reply, body)
    return out


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": status}}


def error_frame(message: str) -> str:
    return sse({"error": {"message": message, "code": 502}})


MALFORMED = 'data: {"choices": [{"index": 0, "delta": {"content": "x"\n\n'
