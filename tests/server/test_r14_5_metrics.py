"""R14.5 / R8.6: Prometheus sees tours by status, stage and first-token latency, tokens in and
out, provider errors by kind and the tours in flight, counted as tours end."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.fakes.fixtures import openai_fake  # noqa: F401 - a fixture, found by name
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, generate, new_chat, stream


def _value(text: str, name: str, **labels: str) -> float:
    """The sample `name{labels}` (labels in any order), 0 when absent."""
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"([a-z_]+)(?:\{(.*)\})? ([0-9.e+-]+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


async def test_r14_5_metrics_count_tours_latency_tokens_and_provider_errors(
    client: httpx.AsyncClient, openai_fake: FakeUpstream  # noqa: F811
) -> None:
    before = (await client.get("/metrics")).text
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("Hello there, friend.")
    await stream(client, chat, "Hi")
    openai_fake.script.error(401, "bad key")
    r = await generate(client, chat, "again", stream=False)
    assert r.status_code == 502
    after = (await client.get("/metrics")).text

    def grew(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert grew("evacore_tours_total", status="completed", mode="normal") == 1
    assert grew("evacore_tours_total", status="failed", mode="normal") == 1
    assert grew("evacore_provider_errors_total", code="provider_http_error") == 1
    assert grew("evacore_tokens_total", direction="in") >= 1
    assert grew("evacore_tokens_total", direction="out") >= 1
    assert grew("evacore_stage_seconds_count", stage="lorebook") == 2
    assert grew("evacore_first_token_seconds_count") == 1
    assert _value(after, "evacore_tours_active") == 0


@pytest.mark.parametrize("labelnames", [(), ("stage",)])
def test_tour_histograms_read_as_prometheus_clients_own(labelnames: tuple[str, ...]) -> None:
    """The stage and first-token histograms, counted a tour at a time, scrape exactly as
    prometheus_client's histogram of the same values (its `_created` times aside)."""
    import re

    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from evacore.pipeline.metrics import LOCK, TourHistogram

    bounds = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1, 2.5, 60)
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("t_seconds", "Doc.", labelnames, buckets=bounds, registry=theirs)
    counted = TourHistogram("t_seconds", "Doc.", labelnames, buckets=bounds)
    ours.register(counted)  # type: ignore[arg-type]

    def scraped(registry: CollectorRegistry) -> list[str]:
        return [re.sub(r"_created(\{.*\})? \S+$", r"_created\1", line)
                for line in generate_latest(registry).decode().splitlines()]

    assert scraped(ours) == scraped(theirs)  # before any value too
    for labels in ([("a",), ("b",)] if labelnames else [()]):
        for value in (0.0005, 0.00001, 0.001, 0.3, 2.5, 60, 61, 1e9, 0.0):
            (reference.labels(*labels) if labels else reference).observe(value)
            with LOCK:
                counted.observe(value, labels)
    assert scraped(ours) == scraped(theirs)
    assert any("_bucket" in line for line in scraped(ours))
