"""Prometheus metrics of tours (R14.5, R8.6): tours by status, stage and first-token latency,
tokens in and out, provider errors by kind, streams in flight.

Must not: carry content or ids (labels are fixed, small sets), or cost anything per token:
a tour is recorded once, when it ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from evacore.pipeline.tour import Tour

TOURS = Counter("evacore_tours_total", "Tours that ended, by status.", ["status", "mode"])
STAGE_SECONDS = Histogram(
    "evacore_stage_seconds", "Time spent in each pipeline stage per tour.", ["stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
             60))
FIRST_TOKEN_SECONDS = Histogram(
    "evacore_first_token_seconds", "From the provider request to the first token sent on.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
TOKENS = Counter("evacore_tokens_total", "Tokens reported by providers.", ["direction"])
PROVIDER_ERRORS = Counter("evacore_provider_errors_total",
                          "Tours that failed on the provider, by error code.", ["code"])
ACTIVE = Gauge("evacore_tours_active", "Tours running on this instance now.")
_STAGE_CHILDREN: dict[str, Any] = {}
"""stage -> its histogram child (`labels()` takes a lock and builds a key on every call)."""


def record(tour: Tour) -> None:
    """Count one ended tour."""
    TOURS.labels(tour.status, tour.mode).inc()
    for stage, ms in tour.timings.items():
        child = _STAGE_CHILDREN.get(stage)
        if child is None:
            child = _STAGE_CHILDREN[stage] = STAGE_SECONDS.labels(stage)
        child.observe(ms / 1000)
    first = tour.diagnostics.get("first_token_ms")
    if isinstance(first, int | float):
        FIRST_TOKEN_SECONDS.observe(first / 1000)
    usage = tour.usage or {}
    for key, direction in (("prompt_tokens", "in"), ("completion_tokens", "out")):
        value = usage.get(key)
        if isinstance(value, int) and value > 0:
            TOKENS.labels(direction).inc(value)
    code = (tour.error or {}).get("code")
    if isinstance(code, str) and code.startswith("provider_"):  # the ProviderError family
        PROVIDER_ERRORS.labels(code).inc()
