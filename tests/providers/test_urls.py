"""R2.10: a base URL with a query string (`?key=…`, as some gateways want) keeps it on every
endpoint an adapter calls, stream and not, side routes too; diagnostics show it masked."""

from __future__ import annotations

import httpx
import pytest

from evacore.providers import make_provider
from evacore.providers._urls import join_url
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import chat_request, events_of, text_of, text_request

QUERY = "key=gw-secret-1234&region=eu"
ENDPOINTS = {
    "openai-chat": ("/v1/chat/completions", "/v1/chat/completions", "/tokenize"),
    "openai-text": ("/v1/completions", "/v1/completions", "/tokenize"),
    "anthropic": ("/v1/messages", "/v1/messages", "/v1/messages/count_tokens"),
    "kobold": ("/api/extra/generate/stream", "/api/v1/generate", "/api/extra/tokencount"),
}


@pytest.mark.parametrize("kind", list(ENDPOINTS))
async def test_r2_10_base_url_query_is_kept_on_every_endpoint(
    kind: str, http_client: httpx.AsyncClient
) -> None:
    stream_path, whole_path, count_path = ENDPOINTS[kind]
    with FakeUpstream(kind) as fake:
        fake.script.reply("Streamed.").reply("Whole.")
        conn = fake.connection(base_url=f"{fake.base_url}/?{QUERY}")
        provider = make_provider(conn, client=http_client)
        request = chat_request() if kind in ("openai-chat", "anthropic") else text_request()
        assert text_of(await events_of(provider, request)) == "Streamed."
        assert (await provider.complete(request)).text == "Whole."
        assert await provider.count_tokens("four words right here") is not None
        seen = [(r.path, r.query) for r in fake.requests]
        assert seen == [(stream_path, QUERY), (whole_path, QUERY), (count_path, QUERY)]
        wire = provider.wire_request(request, stream=True)
        assert wire.url == f"{fake.url}{stream_path}?key=***&region=eu"


def test_join_url_puts_the_path_before_the_query() -> None:
    assert join_url("http://h:1/v1/?k=1#frag", "/chat") == "http://h:1/v1/chat?k=1"
    assert join_url("http://h:1", "/v1/x") == "http://h:1/v1/x"
    assert join_url(" http://h/api/v1?k=a&b=2 ", "/gen", lambda b: b.removesuffix("/api/v1")) \
        == "http://h/gen?k=a&b=2"
