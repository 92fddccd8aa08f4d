"""Tour events as OpenAI's answer: `chat.completion.chunk` SSE lines while streaming, or
one `chat.completion` object.

Must not: decide what the client may see beyond this: only `delta` events and `tool_call`
events of the client's own tools become chunks (evacore's tool calls and results, holds and
discarded answers never do). Chunks are plain bytes built with orjson (P15): the SDK's own
types check their shape in the tests, the hot path pays for no model objects.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from evacore.channels.event_stream import TextFrame

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter"})
DONE = b"data: [DONE]\n\n"


def finish_reason(reason: str | None) -> str:
    """Evacore's finish reason in OpenAI's words: a step limit is a `length`."""
    if reason in FINISH_REASONS:
        return reason  # type: ignore[return-value]
    return "length" if reason == "max_steps" else "stop"


def usage_of(usage: dict[str, Any] | None) -> dict[str, int]:
    u = usage or {}
    prompt, completion = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": int(u.get("total_tokens") or prompt + completion)}


def tool_call_json(call: dict[str, Any]) -> dict[str, Any]:
    return {"id": call["id"], "type": "function",
            "function": {"name": call["name"], "arguments": call.get("arguments") or ""}}


class ChunkWriter:
    """The chunks of one streamed answer; it also keeps what the client was sent."""

    def __init__(self, *, completion_id: str, model: str, include_usage: bool,
                 external: frozenset[str]) -> None:
        self.created = int(time.time())
        self.include_usage = include_usage
        self.external = external
        self.text: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.started = False
        head = {"id": completion_id, "object": "chat.completion.chunk", "created": self.created,
                "model": model}
        self._head = head
        tail = b',"usage":null}' if include_usage else b"}"
        # a text delta is the template around the text: one orjson call per token
        self._text_start = (b"data: " + orjson.dumps(head)[:-1]
                            + b',"choices":[{"index":0,"delta":{"content":')
        self._text_end = b'},"logprobs":null,"finish_reason":null}]' + tail + b"\n\n"
        self.text_frame = TextFrame(None, self._text_end, self.text)
        """A text's chunk alone, for the network read to write (`EventStream`): it can
        once the stream has begun (its first chunk goes out through `events`)."""

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body = {**self._head, "choices": choices, **extra}
        if self.include_usage and "usage" not in extra:
            body["usage"] = None
        return b"data: " + orjson.dumps(body) + b"\n\n"

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish}])

    def _start(self, out: list[bytes]) -> None:
        if not self.started:
            self.started = True
            self.text_frame.open(self._text_start)
            out.append(self._delta({"role": "assistant", "content": "", "refusal": None}))

    def _text_chunk(self, text: str) -> bytes:
        """A text delta's chunk (the template around the text), the text kept as sent."""
        self.text.append(text)
        return self._text_start + orjson.dumps(text) + self._text_end

    def events(self, batch: list[tuple[str, dict[str, Any]]]) -> bytes:
        """The chunks of a batch of tour events (empty when nothing in it is for the client)."""
        if len(batch) == 1 and self.started:  # a token that came alone: its one chunk
            name, data = batch[0]
            if name == "delta":
                text = data.get("text")
                return self._text_chunk(text) if text else b""
        out: list[bytes] = []
        for name, data in batch:
            if name == "delta":
                text = data.get("text") or ""
                if not text:
                    continue
                self._start(out)
                out.append(self._text_chunk(text))
            elif name == "tool_call" and data.get("name") in self.external:
                self._start(out)
                index = len(self.tool_calls)
                self.tool_calls.append(data)
                out.append(self._delta({"tool_calls": [{"index": index,
                                                        **tool_call_json(data)}]}))
        return b"".join(out)

    def finish(self, reason: str | None, usage: dict[str, Any] | None) -> bytes:
        """The last choice chunk, the usage chunk when asked for, then `[DONE]`."""
        out: list[bytes] = []
        self._start(out)
        out.append(self._delta({}, finish_reason(reason)))
        if self.include_usage:
            out.append(self._chunk([], usage=usage_of(usage)))
        out.append(DONE)
        return b"".join(out)

    @property
    def content(self) -> str:
        return "".join(self.text)

    def seen_with(self, batch: list[tuple[str, dict[str, Any]]]
                  ) -> tuple[str, list[dict[str, Any]]]:
        """The text and the client's tool calls it has once `batch` is written too (what
        `events` would add, nothing changed)."""
        text, calls = list(self.text), list(self.tool_calls)
        for name, data in batch:
            if name == "delta":
                text.append(data.get("text") or "")
            elif name == "tool_call" and data.get("name") in self.external:
                calls.append(data)
        return "".join(text), calls


def completion(*, completion_id: str, model: str, content: str,
               tool_calls: list[dict[str, Any]], reason: str | None,
               usage: dict[str, Any] | None) -> dict[str, Any]:
    """The non-stream answer (`chat.completion`)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content if content or not tool_calls else None,
        "refusal": None,
        "tool_calls": [tool_call_json(c) for c in tool_calls] or None,
    }
    return {
        "id": completion_id, "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason(reason)}],
        "usage": usage_of(usage),
    }
