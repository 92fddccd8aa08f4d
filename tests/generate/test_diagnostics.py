"""R2.15, R8.5, R12.2: `GET /v1/tours/{id}` after a tour shows its status, the exact provider
requests with the API key redacted, the change log and per-stage timings; the key appears in
no API answer and no log line."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from evacore.logs import configure_logging
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.generate.helpers import (
    fake_connection,
    generate,
    new_chat,
    one,
    stream,
    tour_of,
)
from tests.helpers import drop_evacore_logging

STAGES = ("user_input", "macros", "character", "lorebook", "memory", "token_count",
          "context_shift", "interceptors", "instruct", "serialize", "request", "streaming",
          "postprocess", "save")
AUTH_HEADER = {"openai-chat": "Authorization", "anthropic": "x-api-key"}


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
async def test_r2_15_tour_diagnostics_hold_the_exact_requests_changes_and_timings(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        "openai_fake" if kind == "openai-chat" else "anthropic_fake")
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.tool_call("list_dir", {}, id="call_1")
    fake.script.reply("Nothing there.")
    events = await stream(client, chat, "Look around.")
    tour = await tour_of(client, one(events, "tour")["tour_id"])
    assert tour["status"] == "completed" and tour["error"] is None
    assert tour["message_id"] == one(events, "message")["message_id"]
    diag = tour["diagnostics"]

    sent = fake.generation_requests
    assert [r["step"] for r in diag["requests"]] == [0, 1]
    for recorded, actual in zip(diag["requests"], sent, strict=True):
        assert recorded["method"] == "POST"
        assert recorded["url"] == fake.url + actual.path
        assert recorded["body"] == actual.json  # exactly what went upstream
        header = AUTH_HEADER[kind]
        assert FAKE_API_KEY in actual.headers.get(header.lower(), "")  # the fake got the key
        assert recorded["headers"][header] == "***"

    stages = [c["stage"] for c in diag["changes"]]
    assert "character" in stages
    character = next(c for c in diag["changes"] if c["stage"] == "character")
    assert "main" in character["added"] and any(
        i.startswith("history:") for i in character["added"])
    assert set(diag["timings"]) == set(STAGES)
    # the live `done` event keeps the timings in the order the stages first ran (stored
    # JSON may reorder keys): swapping two stages in the runner fails here
    assert list(one(events, "done")["timings"]) == list(STAGES)
    assert all(ms >= 0 for ms in diag["timings"].values())
    assert [s["index"] for s in diag["steps"]] == [0, 1]
    assert diag["steps"][0]["tool_calls"][0]["name"] == "list_dir"
    assert FAKE_API_KEY not in json.dumps(tour)


async def test_r12_2_the_api_key_is_in_no_answer_and_no_log_line(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("json", "DEBUG")
    caplog.set_level(logging.DEBUG)
    try:
        conn = await fake_connection(client, openai_fake, params={"retries": 1})
        chat = await new_chat(client, conn)
        # a retried failure that echoes the key, then a failure the tour ends with
        openai_fake.script.error(503, f"bad gateway for key {FAKE_API_KEY}")
        openai_fake.script.error(401, f"Incorrect API key provided: {FAKE_API_KEY}")
        failed = await stream(client, chat, "First try.")
        assert failed[-1][0] == "error" and "401" in failed[-1][1]["message"]
        openai_fake.script.reply("Fine now.")
        ok = await generate(client, chat, "Second try.", stream=False)
        assert ok.status_code == 200, ok.text
        answers = [
            json.dumps(failed),
            ok.text,
            json.dumps(await tour_of(client, one(failed, "tour")["tour_id"])),
            json.dumps(await tour_of(client, ok.json()["tour_id"])),
            (await client.get("/v1/connections")).text,
            (await client.get(f"/v1/connections/{conn}")).text,
            (await client.patch(f"/v1/connections/{conn}", json={"model": "m2"})).text,
            (await client.get(f"/v1/chats/{chat}/messages")).text,
        ]
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()
    assert len(openai_fake.generation_requests) == 3
    assert "provider.retry" in caplog.text + err  # the retry was logged …
    assert "tour.failed" in caplog.text + err
    for text in [*answers, caplog.text, err]:
        assert FAKE_API_KEY not in text  # … and nothing anywhere carries the key
        assert FAKE_API_KEY[:-4] not in text


async def test_r12_2_connections_show_a_masked_key_only(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    r = await client.post("/v1/connections", json={
        "name": "keyed", "kind": "openai-chat", "base_url": openai_fake.base_url,
        "api_key": FAKE_API_KEY, "model": "m"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["has_api_key"] is True
    masked = created["api_key"]
    assert masked != FAKE_API_KEY and FAKE_API_KEY[4:-4] not in masked
    listed = (await client.get("/v1/connections")).json()["connections"]
    assert [c["api_key"] for c in listed if c["id"] == created["id"]] == [masked]
    assert FAKE_API_KEY not in (await client.get("/v1/connections")).text
    # a guest reads connections too, and sees no more than the master
    from tests.conftest import make_user

    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    r = await client.get(f"/v1/connections/{created['id']}", headers=guest)
    assert r.status_code == 200 and FAKE_API_KEY not in r.text
