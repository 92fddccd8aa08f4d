"""The fake's Anthropic wire: /v1/messages (stream events and whole messages) and
/v1/messages/count_tokens.

Must not: decide what to answer (the Script does).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes._frames import Frame, fake_tokens, request_text, split3, sse
from tests.fakes.script import Reply

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _stop_reason(reply: Reply) -> str:
    return _STOP.get(reply.finish(), reply.finish())


def _call_id(reply: Reply, i: int) -> str:
    return reply.tool_calls[i].id or f"toolu_fake_{i}"


def frames(reply: Reply, body: Any) -> list[Frame]:
    prompt = fake_tokens(request_text(body))
    start = {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": reply.model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1}}}
    out = [Frame(sse(start, "message_start")), Frame(sse({"type": "ping"}, "ping"))]
    index = 0

    def block(start_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(Frame(sse({"type": "content_block_start", "index": index,
                              "content_block": start_block}, "content_block_start")))
        for delta in deltas:
            out.append(Frame(sse({"type": "content_block_delta", "index": index, "delta": delta},
                                 "content_block_delta"), delta=True))
        out.append(Frame(sse({"type": "content_block_stop", "index": index},
                             "content_block_stop")))
        index += 1

    if reply.reasoning:
        block({"type": "thinking", "thinking": ""},
              [{"type": "thinking_delta", "thinking": reply.reasoning}])
    pieces = reply.pieces()
    if pieces:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])
    for i, call in enumerate(reply.tool_calls):
        block({"type": "tool_use", "id": _call_id(reply, i), "name": call.name, "input": {}},
              [{"type": "input_json_delta", "partial_json": p} for p in split3(call.arguments)])
    completion = fake_tokens(reply.text) + sum(fake_tokens(c.arguments) for c in reply.tool_calls)
    out.append(Frame(sse({"type": "message_delta",
                          "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                          "usage": {"output_tokens": completion}}, "message_delta")))
    out.append(Frame(sse({"type": "message_stop"}, "message_stop")))
    return out


def whole(reply: Reply, body: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "x"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, call in enumerate(reply.tool_calls):
        content.append({"type": "tool_use", "id": _call_id(reply, i), "name": call.name,
                        "input": json.loads(call.arguments or "{}")})
    completion = fake_tokens(reply.text) + sum(fake_tokens(c.arguments) for c in reply.tool_calls)
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": reply.model,
            "content": content, "stop_reason": _stop_reason(reply), "stop_sequence": None,
            "usage": {"input_tokens": fake_tokens(request_text(body)),
                      "output_tokens": completion}}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error",
            400: "invalid_request_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_frame(message: str) -> str:
    return sse({"type": "error", "error": {"type": "overloaded_error", "message": message}},
               "error")


def count_tokens(body: Any) -> dict[str, Any]:
    return {"input_tokens": fake_tokens(request_text(body))}


MALFORMED = 'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0\n\n'
