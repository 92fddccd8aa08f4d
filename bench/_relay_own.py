"""A paced token's own CPU through each relay of the relay benchmark: the same process
answering the same paced stream at two lengths, one request at a time, the two lengths in
turn; the median difference of a pair's CPU, over the tokens the longer one holds more, is
what one token that arrives alone costs, with no part of its request or tour in it.

Must not: start or stop a process, or judge a figure (`bench_relay.py` does both).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cold import _Target


class Turns(_Target):
    """A facade chat's requests: each one of two alternating bodies (`bodies(turn)`), so
    that every request is a new turn of the chat, not a regenerate."""

    def __init__(self, http: httpx.Client, pid: int, url: str,
                 bodies: Callable[[int], dict[str, Any]]) -> None:
        super().__init__(http, pid, url, bodies(0))
        self.bodies, self.turn = bodies, 0

    def once(self) -> float:
        self.body = self.bodies(self.turn)
        self.turn += 1
        return super().once()


def own_per_token(pairs: dict[str, tuple[_Target, _Target]], extra_tokens: int, rounds: int,
                  warm: int = 2) -> dict[str, float]:
    """µs of CPU per token beyond the shorter stream, for each relay named in `pairs` (its
    targets for the shorter and the longer stream, warmed first): the median over `rounds`
    of the longer request's CPU less the shorter one's made next to it (which of the two
    goes first flips each round). A pair shares the moment's state of the shared machine,
    so a slow spell of a few seconds moves both of its requests and not their difference."""
    own: dict[str, float] = {}
    for who, (short, long_) in pairs.items():
        short.warmed(warm)
        long_.warmed(warm)
        runs = short.in_turn(long_, rounds)
        differences = [b - a for (a, _), (b, _) in zip(runs[short], runs[long_], strict=True)]
        own[who] = statistics.median(differences) / extra_tokens
    return own
