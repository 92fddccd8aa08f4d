"""R14.5 / R8.6: Prometheus sees tours by status, stage and first-token latency, tokens in and
out, provider errors by kind and the tours in flight, counted as tours end."""

from __future__ import annotations

import re

import httpx

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
