"""Incremental Server-Sent Events decoding (WHATWG rules) and strict JSON for `data:` payloads.

Must not: know any vendor's event names or payload shapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from evacore.errors import ProviderProtocolError


@dataclass(slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    """Feed decoded text chunks in any split; get whole events back.

    Tolerates `\\r\\n`, `\\r` and `\\n` line ends, `:` comment lines, multi-line `data:`
    fields, and a last event without its blank line at end of stream (see `flush`).

    Nothing is held between events when `_buf`, `_data` and `_event` are all empty: the fast
    lane (`_fast_lane.py`) reads those three fields in place before it takes a chunk itself.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: str) -> Iterator[SSEEvent]:
        """The events `chunk` completes, each as soon as its lines are read: the first
        event of a long burst goes on before the rest of it is parsed. Take them all before
        the next `feed` or `flush` (what is not taken is lost)."""
        buf = self._buf + chunk if self._buf else chunk
        held = False
        if "\r" in buf:
            held = buf.endswith("\r")  # may be the first half of "\r\n"
            if held:
                buf = buf[:-1]
            buf = buf.replace("\r\n", "\n").replace("\r", "\n")
        lines = buf.split("\n")
        rest = lines.pop()
        self._buf = rest + "\r" if held else rest
        for line in lines:
            if line.startswith("data:"):  # the hot path
                self._data.append(line[6:] if line[5:6] == " " else line[5:])
                continue
            if not line and self._data:  # the blank line that ends an event
                data = self._data
                self._data = []
                event, self._event = self._event, ""
                yield SSEEvent(event or "message", data[0] if len(data) == 1 else "\n".join(data),
                               self._id)
                continue
            event = self._line(line)
            if event is not None:
                yield event

    def flush(self) -> list[SSEEvent]:
        """End of stream: finish a pending line and a pending event."""
        out: list[SSEEvent] = []
        if self._buf:
            event = self._line(self._buf.rstrip("\r"))
            self._buf = ""
            if event is not None:
                out.append(event)
        event = self._line("")
        if event is not None:
            out.append(event)
        return out

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event = ""
            self._data = []
            return event
        if line[0] == ":":
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None


def parse_json_object(data: str | bytes, what: str) -> dict[str, Any]:
    """A JSON object (a whole non-stream answer or one event), else a protocol error."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        snippet = text if len(text) <= 120 else text[:120] + "…"
        raise ProviderProtocolError(f"malformed JSON in the {what}: {snippet!r}") from None
    if not isinstance(value, dict):
        raise ProviderProtocolError(f"the {what} is not a JSON object")
    return value
