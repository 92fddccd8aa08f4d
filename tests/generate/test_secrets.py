"""R2.15, R12.2: no secret of a connection (API key, a custom secret header, a query key in
the base URL) nor the caller's token shows in any client-visible error, stored diagnostic,
API answer or log line, even when the upstream echoes them back in broken events and error
bodies; and a base URL with a query string keeps it on the endpoint."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from evacore.logs import configure_logging
from tests.conftest import MASTER_TOKEN
from tests.fakes.script import Reply
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream, echo_of
from tests.generate.helpers import fake_connection, generate, new_chat, one, stream, tour_of
from tests.helpers import drop_evacore_logging

HEADER_SECRET = "hdr-secret-4242-xyz"
QUERY_SECRET = "qsecret-9876-abc"
SECRETS = (FAKE_API_KEY, HEADER_SECRET, QUERY_SECRET, MASTER_TOKEN)


def _assert_clean(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows {secret!r}"
        assert secret[:-4] not in text, f"{where} shows most of {secret!r}"


async def _secret_connection(client: httpx.AsyncClient, fake: FakeUpstream) -> str:
    return await fake_connection(
        client, fake, base_url=f"{fake.base_url}?key={QUERY_SECRET}",
        params={"retries": 1, "extra_headers": {"X-Custom-Token": HEADER_SECRET,
                                                "X-Title": "evacore tests"}},
    )


def _echoing_faults() -> list[tuple[str, Reply]]:
    """(what the client asks, what the upstream answers), each echoing the credentials."""
    return [
        ("stream", Reply(text="Seven gulls sat on a post.", malformed_after=1, echo=True)),
        ("json", Reply(malformed_after=0, echo=True)),
        ("stream", Reply(text="Seven gulls sat.", error_event_after=1, echo=True)),
        ("stream", Reply(status=401, error_message="Incorrect API key provided:", echo=True)),
        ("json", Reply(status=403, error_message="forbidden for", echo=True)),
    ]


PATHS = {"openai-chat": "/v1/chat/completions", "anthropic": "/v1/messages"}
AUTH = {"openai-chat": ("Authorization", f"Bearer {FAKE_API_KEY}"),
        "anthropic": ("x-api-key", FAKE_API_KEY)}


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
async def test_r12_2_no_secret_in_errors_diagnostics_answers_or_logs(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        "openai_fake" if kind == "openai-chat" else "anthropic_fake")
    auth_header, auth_value = AUTH[kind]
    configure_logging("json", "DEBUG")
    caplog.set_level(logging.DEBUG)
    shown: list[tuple[str, str]] = []
    try:
        conn = await _secret_connection(client, fake)
        chat = await new_chat(client, conn)
        # a retried 503 that echoes everything, then the echoing faults one by one
        fake.script.add(Reply(status=503, error_message="loading; you sent", echo=True))
        tours = []
        for mode, reply in _echoing_faults():
            fake.script.add(reply)
            if mode == "stream":
                events = await stream(client, chat, "Tell me about the gulls.")
                assert events[-1][0] == "error", events
                shown.append(("SSE", json.dumps(events)))
                tours.append(one(events, "tour")["tour_id"])
            else:
                r = await generate(client, chat, "Tell me about the gulls.", stream=False)
                assert r.status_code >= 400, r.text
                assert r.json()["error"]["code"].startswith("provider_"), r.text
                shown.append(("JSON error", r.text))
        codes = {json.loads(text)[-1][1]["code"] for where, text in shown if where == "SSE"}
        assert {"provider_protocol_error", "provider_http_error"} <= codes
        r = await generate(client, chat, "Once more.", stream=False)
        assert r.status_code == 200, r.text
        tours.append(r.json()["tour_id"])
        for tour_id in tours:
            tour = await tour_of(client, tour_id)
            shown.append((f"GET /v1/tours/{tour_id}", json.dumps(tour)))
        shown.append(("GET /v1/connections/{id}", (await client.get(f"/v1/connections/{conn}")).text))
        shown.append(("GET /v1/connections", (await client.get("/v1/connections")).text))
        shown.append(("messages", (await client.get(f"/v1/chats/{chat}/messages")).text))
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()

    # the upstream did get the secrets, and echoed all of them back into what it answered
    sent = fake.generation_requests
    assert len(sent) == 1 + len(_echoing_faults()) + 1  # the 503, retried once
    for recorded in sent:
        assert recorded.path == PATHS[kind]
        assert recorded.query == f"key={QUERY_SECRET}"
        assert recorded.headers[auth_header.lower()] == auth_value
        assert recorded.headers["x-custom-token"] == HEADER_SECRET
        echo = echo_of(recorded)
        assert all(s in echo for s in (FAKE_API_KEY, HEADER_SECRET, QUERY_SECRET))
    assert "tour.failed" in err and "provider.retry" in err
    for where, text in [*shown, ("log output", err), ("captured log records", caplog.text)]:
        _assert_clean(text, where)

    # the diagnostics still show which request went where, with the secrets masked
    diag = (await tour_of(client, tours[-1]))["diagnostics"]["requests"][0]
    assert diag["url"] == f"{fake.url}{PATHS[kind]}?key=***"
    assert diag["headers"][auth_header] == "***"
    assert diag["headers"]["X-Custom-Token"] == "***"
    assert diag["headers"]["X-Title"] == "evacore tests"


async def test_r12_2_connections_mask_secret_headers_and_query_keys_and_keep_them(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    conn = await _secret_connection(client, openai_fake)
    shown: dict[str, Any] = (await client.get(f"/v1/connections/{conn}")).json()
    assert shown["api_key"] == "…" + FAKE_API_KEY[-4:]
    assert shown["base_url"] == f"{openai_fake.base_url}?key=…{QUERY_SECRET[-4:]}"
    assert shown["params"]["extra_headers"] == {"X-Custom-Token": "…" + HEADER_SECRET[-4:],
                                                "X-Title": "evacore tests"}
    _assert_clean(json.dumps(shown), "the connection")

    # a client that sends back what it read (with one change) keeps the stored secrets
    body = {k: shown[k] for k in ("name", "base_url", "api_key", "params")}
    r = await client.patch(f"/v1/connections/{conn}", json={**body, "model": "other-model"})
    assert r.status_code == 200, r.text
    _assert_clean(r.text, "the PATCH answer")
    openai_fake.script.reply("Still here.")
    chat = await new_chat(client, conn)
    r = await generate(client, chat, "Hello?", stream=False)
    assert r.status_code == 200, r.text
    sent = openai_fake.generation_requests[-1]
    assert sent.query == f"key={QUERY_SECRET}"
    assert sent.headers["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert sent.headers["x-custom-token"] == HEADER_SECRET
    assert sent.json["model"] == "other-model"

    # a new value replaces the secret
    r = await client.patch(f"/v1/connections/{conn}", json={
        "params": {"extra_headers": {"X-Custom-Token": "a-brand-new-token-77"}}})
    assert r.status_code == 200, r.text
    assert r.json()["params"]["extra_headers"]["X-Custom-Token"] == "…n-77"
    openai_fake.script.reply("New token.")
    assert (await generate(client, chat, "Again?", stream=False)).status_code == 200
    assert openai_fake.generation_requests[-1].headers["x-custom-token"] == "a-brand-new-token-77"
