"""Prometheus metrics of tours (R14.5, R8.6): tours by status, stage and first-token latency,
tokens in and out, provider errors by kind, streams in flight.

Must not: carry content or ids (labels are fixed, small sets), or cost anything per token:
a tour is recorded once, when it ends.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from evacore.pipeline.tour import Tour


class TourHistogram:
    """A Prometheus histogram observed without a lock per value: `record` takes one lock per
    tour for all of its values (prometheus_client's own histogram takes one for the sum and
    one for the bucket of every value and checks its labels each time: counted by bytecode,
    about 3 % of the Python a one-token tour ran went into its stage timings).

    Exposed as prometheus_client's histogram is: its buckets, count, sum and `_created`."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                 *, buckets: Sequence[float]) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self.bounds = [float(b) for b in buckets]
        self._series: dict[tuple[str, ...], list[Any]] = {}
        """labels -> [count per bucket (the last one +Inf), sum, created]."""
        if not self.labelnames:  # shown from the start, as prometheus_client shows it
            self._new(())

    def _new(self, labels: tuple[str, ...]) -> list[Any]:
        series = self._series[labels] = [[0] * (len(self.bounds) + 1), 0.0, time.time()]
        return series

    def observe(self, value: float, labels: tuple[str, ...] = ()) -> None:
        """Count `value` (the caller holds `LOCK`)."""
        self.observe_each({labels: value})

    def observe_each(self, values: Mapping[tuple[str, ...], float]) -> None:
        """Count each value under its labels (the caller holds `LOCK`)."""
        series_of, bounds, find = self._series, self.bounds, bisect.bisect_left
        for labels, value in values.items():
            series = series_of.get(labels) or self._new(labels)
            series[0][find(bounds, value)] += 1
            series[1] += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation,
                                       labels=list(self.labelnames))
        with LOCK:
            taken = [(labels, list(s[0]), s[1], s[2]) for labels, s in self._series.items()]
        for labels, counts, total, created in taken:
            cumulative, buckets = 0, []
            for bound, count in zip([*self.bounds, float("inf")], counts, strict=True):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric(list(labels), buckets, total)
            family.samples.append(Sample(self.name + "_created",
                                         dict(zip(self.labelnames, labels, strict=True)),
                                         created))
        yield family


LOCK = threading.Lock()
"""Held while a tour's values are counted or a scrape copies them."""
TOURS = Counter("evacore_tours_total", "Tours that ended, by status.", ["status", "mode"])
STAGE_SECONDS = TourHistogram(
    "evacore_stage_seconds", "Time spent in each pipeline stage per tour.", ["stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
             60))
FIRST_TOKEN_SECONDS = TourHistogram(
    "evacore_first_token_seconds", "From the provider request to the first token sent on.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
REGISTRY.register(STAGE_SECONDS)  # type: ignore[arg-type]
REGISTRY.register(FIRST_TOKEN_SECONDS)  # type: ignore[arg-type]
TOKENS = Counter("evacore_tokens_total", "Tokens reported by providers.", ["direction"])
PROVIDER_ERRORS = Counter("evacore_provider_errors_total",
                          "Tours that failed on the provider, by error code.", ["code"])
ACTIVE = Gauge("evacore_tours_active", "Tours running on this instance now.")
_TOUR_CHILDREN: dict[tuple[str, str], Any] = {}
"""(status, mode) -> its counter child (`labels()` takes a lock and builds a key each call)."""


def record(tour: Tour) -> None:
    """Count one ended tour."""
    child = _TOUR_CHILDREN.get((tour.status, tour.mode))
    if child is None:
        child = _TOUR_CHILDREN[(tour.status, tour.mode)] = TOURS.labels(tour.status, tour.mode)
    child.inc()
    first = tour.diagnostics.get("first_token_ms")
    with LOCK:
        STAGE_SECONDS.observe_each({(stage,): ms / 1000 for stage, ms in tour.timings.items()})
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
