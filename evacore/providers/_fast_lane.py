"""The fast lane of a relayed answer: plain text deltas parsed in the network read's own
callback and handed to the consumer's `TextTap`, without waking the consumer's task and
with no event object made per token.

A chunk is taken only whole, and only when everything before it has been read and decoded:
the reader is parked waiting for data, the SSE decoder holds no partial line, event or
character, and the chunk is nothing but complete `data:` events that the adapter's
`fast_text` turns into text (a chunk that is one event of the shape that parse has learned
is read from its bytes, `_chunk_template.py`). Anything else (a split event, an empty delta,
a finish, a tool call, usage, an error, `[DONE]`) is left to the ordinary path, which sees
it in order.

Must not: know a vendor's format (the adapter's `fast_text` does), decide whether the
consumer can take a text (its tap does), or raise: a refusal is always the safe answer.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from typing import Protocol

import orjson

from evacore.providers._chunk_template import Template
from evacore.providers._sse import SSEDecoder
from evacore.providers.base import TextTap


class TokenClock(Protocol):
    """The request's clock, which a token the lane took moves (`Deadlines`): plain
    attributes, set without a call."""

    first_token_seen: bool
    token_at: float
    """`time.monotonic()` when the lane last took a token (0.0: none yet)."""


FastText = Callable[[str, "FastLane"], "str | None"]
"""The text of one SSE `data:` payload that is a plain text delta and nothing else (for
this lane: its `model` is the name the ordinary path saw last, or the stream's first name
when none was seen yet), else None."""


class FastLane:
    """One streamed attempt's fast lane: the consumer's tap, the adapter's parse, and the
    request's clock each taken token moves (`clock`)."""

    __slots__ = ("_model", "clock", "closed", "decoder", "fast_text", "ready", "state", "tap",
                 "utf8")

    def __init__(self, tap: TextTap, fast_text: FastText, clock: TokenClock) -> None:
        self.tap = tap
        self.fast_text = fast_text
        self.clock = clock
        self.closed = False
        self._model: str | None = None
        self.state: object = None
        """What the adapter's `fast_text` keeps of this stream (`_chunk_template.py`)."""
        self.ready: tuple[bytes, bytes, int, int, int] | None = None
        """The learned template a network chunk is read by, while it names the model the
        ordinary path saw last (`arm`): its `start`, `end`, where the text's JSON begins,
        the fewest bytes a chunk of it has, and where the JSON ends counted from the end."""
        self.decoder = SSEDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        """The attempt's SSE and UTF-8 decoders: the ordinary path reads its chunks with
        them, and its body tap (`reader()`) checks them."""

    @property
    def model(self) -> str | None:
        """The model name the ordinary path saw last (or the stream's first, taken here before
        it saw any): a chunk naming another is left to it."""
        return self._model

    @model.setter
    def model(self, name: str | None) -> None:
        self._model = name
        self.arm()

    def arm(self) -> None:
        """Read chunks by the template `state` holds when it is learned and names the model
        the ordinary path saw last; else by the whole parse (called whenever either moves)."""
        t = self.state
        self.ready = ((t.start, t.end, t.start_len, t.end_at + 1, -len(t.end))
                      if type(t) is Template and t.start_len and t.model == self._model
                      else None)

    def close(self) -> None:
        """Nothing more is taken (the answer finished: what follows is drained unread)."""
        self.closed = True

    def reader(self, decoder: SSEDecoder | None = None,
               utf8: codecs.IncrementalDecoder | None = None) -> Callable[[bytes], bool]:
        """The body tap of a connection whose chunks `decoder` (after `utf8`) decodes: the
        attempt's own (`self.decoder`, `self.utf8`) when not given. Made once an attempt and
        not kept here (it refers to the lane: kept, the two would be a cycle)."""
        decoder = self.decoder if decoder is None else decoder
        utf8 = self.utf8 if utf8 is None else utf8
        tap, clock = self.tap, self.clock
        loads, JSONDecodeError, monotonic = orjson.loads, orjson.JSONDecodeError, time.monotonic

        def take(body: bytes) -> bool:
            # the decoder holds nothing between events (its three fields, `SSEDecoder`)
            if (tap.take is None or self.closed or utf8.buffer or decoder._buf
                    or decoder._data or decoder._event):
                return False
            try:
                # the usual paced token: a chunk that is one `data: ` event of the template
                # the parse learned, its bytes around one JSON string (`_chunk_template.py`).
                # The template's ends hold no line break or carriage return (the lane
                # refuses events with them) and a JSON string holds none unescaped, so the
                # chunk is that one event; only the string is parsed, as the whole parse
                # would read it
                t = self.ready
                if t is not None:
                    start, end, at, least, stop = t
                    if (len(body) >= least and body[at] == 34  # '"'
                            and body.startswith(start) and body.endswith(end)):
                        try:
                            piece = loads(body[at:stop])
                        except JSONDecodeError:
                            piece = None
                        # parsed whole from a '"', it is a JSON string: a text, or empty
                        if piece:
                            give = tap.take_text
                            if (give is not None and give(piece)) or tap.take([piece]):
                                clock.first_token_seen = True  # the idle deadline runs from now
                                clock.token_at = monotonic()
                                return True
                            return False
                texts = self._texts(body)
                if texts is None:
                    return False
                if len(texts) == 1:
                    give = tap.take_text
                    taken = (give is not None and give(texts[0])) or tap.take(texts)
                else:
                    taken = tap.take(texts)
            except Exception:  # noqa: BLE001 - a tap that fails refuses; the ordinary path goes on
                self.closed = True
                return False
            if taken:  # the answer has begun; the idle deadline runs from now
                clock.first_token_seen = True
                clock.token_at = monotonic()
            return taken

        return take

    def _texts(self, body: bytes) -> list[str] | None:
        """The texts of a chunk of whole `data:` events, each a plain text delta; else None."""
        try:
            text = body.decode()
        except UnicodeDecodeError:
            return None
        if "\r" in text:  # CRLF line ends, as some servers send them
            text = text.replace("\r\n", "\n")
            if "\r" in text:
                return None
        if not text.endswith("\n\n"):
            return None
        texts = []
        fast_text = self.fast_text
        for event in text[:-2].split("\n\n"):
            if not event.startswith("data:") or "\n" in event:
                return None
            piece = fast_text(event[6:] if event[5:6] == " " else event[5:], self)
            if piece is None:
                return None
            texts.append(piece)
        return texts
