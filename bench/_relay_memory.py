"""The memory an extra stream takes, for the relay benchmark: S2 through generate and through
the facade, then S3 through generate, against an evacore started for this alone; the growth
of its peak RSS from the higher S2 peak to the S3 peak, over the extra streams.

A fresh process for every measurement: an allocator seldom gives memory back, so a second
S3 in the same process measures how it reuses what the first one took, not the streams.
Runs of the same code differ by several KB (where the allocator's pools happen to fall), so
the benchmark takes several and reports their median and spread.

Must not: judge a figure (`bench_relay.py` does) or leave its server running.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _relay_procs as procs
from _relay_setup import TOKEN, Setup, facade_plan, generate_plan, model_name, port_of

Relayed = Callable[[list[str], procs.Child, dict[str, Any], float], dict[str, Any]]
"""`bench_relay._relayed`: one load plan through a relay, with its CPU and peak RSS."""


@dataclass(frozen=True)
class Growth:
    """One fresh server's S2 and S3 peaks (bytes) and what an extra stream took (KB)."""

    peak2: int
    peak3: int
    extra_streams: int
    errors: int

    @property
    def kb(self) -> float:
        return (self.peak3 - self.peak2) / self.extra_streams / 1024


def extra_stream(server_prefix: list[str], load_prefix: list[str], upstream_url: str,
                 s2: Any, s3: Any, relayed: Relayed) -> Growth:
    """S2 (generate, then the facade) and S3 (generate) against a new evacore that streams
    from `upstream_url` (its answers as long and as paced as the scenarios'); each stream on
    a chat of its own, warmed as the benchmark's own server is."""
    with tempfile.TemporaryDirectory(prefix="evacore-bench-memory-") as tmp:
        server, url = procs.server(server_prefix, Path(tmp), TOKEN)
        setup = Setup(url)
        try:
            model = model_name(s2.tokens, s2.delay_ms)
            connection = setup.connection(upstream_url, s2.tokens, s2.delay_ms)
            setup.warm(setup.chats(connection, 1)[0])
            setup.warm_facade(setup.chats(connection, 1)[0], "@" + model)
            port = port_of(url)
            timeout = max(s2.seconds or 0, s3.seconds or 0) + 180

            def relay(scenario_plan: dict[str, Any]) -> dict[str, Any]:
                return relayed(load_prefix, server, scenario_plan, timeout)

            first = relay(generate_plan(port, setup.chats(connection, s2.concurrency), s2))
            facade = relay(facade_plan(port, setup.chats(connection, s2.concurrency),
                                       "@" + model, s2))
            third = relay(generate_plan(port, setup.chats(connection, s3.concurrency), s3))
        except Exception as exc:
            raise RuntimeError(f"memory run failed: {exc}\n{server.tail()}") from exc
        finally:
            setup.http.close()
            server.stop()
    return Growth(peak2=max(first["rss_peak"], facade["rss_peak"]), peak3=third["rss_peak"],
                  extra_streams=s3.concurrency - s2.concurrency,
                  errors=first["errors"] + facade["errors"] + third["errors"])
