"""What a fake upstream answers: a queue of Replies (one per generation request) with text,
tool calls, timing and faults, and a default Reply once the queue is empty.

Must not: know any wire format (the fake apps render a Reply in theirs).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass
class FakeToolCall:
    name: str
    arguments: str  # the raw JSON text, streamed in pieces
    id: str | None = None


@dataclass
class Reply:
    """One answer. Fault fields count text deltas: `reset_after=2` sends two deltas, then a
    TCP reset; `hang_after=0` hangs before the first token; `hang_before_headers` sends
    nothing at all."""

    text: str = "Hello from the fake upstream."
    chunks: list[str] | None = None  # exact streamed pieces (default: word by word)
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    reasoning: str = ""
    finish_reason: str | None = None  # default: tool_calls if any, else stop
    status: int = 200
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    hang_before_headers: bool = False
    hang_after: int | None = None
    reset_after: int | None = None
    malformed_after: int | None = None
    error_event_after: int | None = None
    usage: bool = True
    model: str = "fake-model"
    echo: bool = False
    """Echo what the request carried (its credential headers and query string) into the
    error body, the in-stream error event and the malformed event, as a careless or
    hostile upstream would. A non-stream answer with `malformed_after` set is broken JSON."""
    flood_bytes: int = 0
    """Stream this many bytes of text (in `flood_piece` deltas) as fast as the client reads
    (`token_delay` apart when set): each write waits while the socket's send buffer is
    full, so `bytes_written` shows how far a client that stops reading let the answer get."""
    flood_piece: int = 4096

    def pieces(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return _WORDS.findall(self.text)

    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


class Script:
    """Thread-safe: tests queue replies, the server thread takes them.

    script.reply("Hi")                      # next generation answers "Hi"
    script.tool_call("read_file", {"path": "a.txt"})
    script.error(500, "boom", times=2)      # two failures, then the next queued reply
    script.error(429, "slow down", retry_after="1")
    script.default = Reply(text="…")        # what to answer when the queue is empty
    """

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply()
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()

    def add(self, reply: Reply, times: int = 1) -> Script:
        with self._lock:
            for _ in range(times):
                self._queue.append(replace(reply))
        return self

    def reply(self, text: str = "Hello from the fake upstream.", **fields: Any) -> Script:
        return self.add(Reply(text=text, **fields))

    def tool_call(self, name: str, arguments: dict[str, Any] | str, *, id: str | None = None,
                  text: str = "", **fields: Any) -> Script:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return self.add(Reply(text=text, tool_calls=[FakeToolCall(name, args, id)], **fields))

    def error(self, status: int, message: str = "upstream failure", *, times: int = 1,
              retry_after: str | None = None, retry_after_ms: int | None = None) -> Script:
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        return self.add(Reply(status=status, error_message=message, headers=headers), times)

    def next(self) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else replace(self.default)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)
