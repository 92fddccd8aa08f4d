"""A stream's text chunks read as one template around their text (the fast lane's parse).

An upstream usually sends every text chunk of one stream as the same JSON but for the text:
the same id, time, model and choice envelope. Once a chunk has passed the adapter's whole
parse, the JSON before and after its text is kept as the stream's template; a later chunk
that starts and ends as the template does, with exactly one JSON string between, is that
string, read without parsing the rest again (about a fifth of a relayed token's own work).

Must not: read a chunk otherwise than the whole parse would. A template is kept only when a
probe built from it (its two ends around a text of its own) passes the whole parse with that
text, so the two ends hold nothing the parse refuses and the slot between is the text the
parse returns; a chunk uses it only when the slot holds one JSON string and nothing else, so
its JSON differs from the probe's in that string alone. Anything else takes the whole parse.

The fast lane (`_fast_lane.py`) reads a whole network chunk the same way before it is even
decoded, when the chunk is one `data: ` event of the template and nothing else (the usual
paced token): the SSE framing around the template is fixed too, so the chunk is its bytes
around one JSON string, `Template.start` and `Template.end`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from evacore.providers._fast_lane import FastLane

Parse = Callable[[str, "FastLane"], "str | None"]
PROBE = "\u0001probe"
"""The text a template is checked with: no upstream sends it, and it needs escaping."""
LEARN_TRIES = 3
"""Templates one stream may try to learn: an upstream whose chunks differ in more than their
text (a counter, a fresh id each) is left to the whole parse after these."""


class Template:
    __slots__ = ("end", "end_at", "head", "model", "start", "start_len", "tail", "tries")

    def __init__(self) -> None:
        self.head = self.tail = ""
        self.start = self.end = b""
        """A network chunk of one event of this template: `start`, the text's JSON, `end`."""
        self.start_len = self.end_at = 0
        """`len(start)`; `len(start) + len(end)`: where the text's JSON begins, and the
        bytes of such a chunk besides it."""
        self.model: str | None = None
        self.tries = 0


def templated(parse: Parse) -> Parse:
    """`parse` (an adapter's whole parse of one `data:` payload) with the template in front."""

    def text_of(data: str, lane: FastLane) -> str | None:
        t = lane.state
        if type(t) is Template and t.head and t.model == lane.model:
            head, tail = t.head, t.tail
            if (data.startswith(head) and data.endswith(tail)
                    and len(data) > len(head) + len(tail)):
                middle = data[len(head):len(data) - len(tail)]
                if middle[0] == '"':
                    try:
                        text = orjson.loads(middle)
                    except orjson.JSONDecodeError:
                        text = None
                    if type(text) is str:
                        return text or None
        text = parse(data, lane)
        if text is not None:
            _learn(data, lane, text, parse)
        return text

    return text_of


def _learn(data: str, lane: FastLane, text: str, parse: Parse) -> None:
    """Keep `data` around `text` as the lane's template, if a probe in its place passes
    `parse` as that text (at most `LEARN_TRIES` tries a stream)."""
    t = lane.state
    if t is None:
        t = lane.state = Template()
    elif type(t) is not Template:
        return
    if t.tries >= LEARN_TRIES:
        return
    t.tries += 1
    literal = orjson.dumps(text).decode()
    at = data.rfind(literal)
    if at < 0:  # the upstream escapes its text otherwise than orjson would
        return
    head, tail = data[:at], data[at + len(literal):]
    if parse(head + orjson.dumps(PROBE).decode() + tail, lane) == PROBE:
        t.head, t.tail, t.model = head, tail, lane.model
        t.start, t.end = b"data: " + head.encode(), tail.encode() + b"\n\n"
        t.start_len, t.end_at = len(t.start), len(t.start) + len(t.end)
        lane.arm()
