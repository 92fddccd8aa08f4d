"""R8 "never a 500 for bad input": a NUL character (U+0000) in what a request sends is never a
500. PostgreSQL cannot store it (a 4xx, nothing stored); SQLite can, and keeps it, except in a
message to generate, which is refused on both (its text goes everywhere a tour writes)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.both_backends


async def test_r8_a_nul_character_is_refused_never_a_500(
        client: httpx.AsyncClient, backend: str) -> None:
    chat = (await client.post("/v1/chats", json={"title": "fine"})).json()["id"]
    for method, url, body in (
        ("POST", "/v1/connections", {"name": "a\u0000b", "kind": "mock"}),
        ("POST", "/v1/chats", {"title": "\u0000"}),
        ("PATCH", f"/v1/chats/{chat}", {"title": "x\u0000"}),
    ):
        r = await client.request(method, url, json=body)
        assert r.status_code < 500, (method, url, r.status_code, r.text)
        if backend == "postgresql":
            assert r.status_code == 422 and "NUL" in r.json()["error"]["message"]
    for method, url, body in (
        ("POST", f"/v1/chats/{chat}/generate",
         {"message": {"content": "hello\u0000world"}, "stream": False}),
        ("POST", f"/v1/chats/{chat}/generate",
         {"message": {"content": "hello\u0000world"}, "stream": True}),
        ("GET", "/v1/chats/%00", None),
        ("GET", "/v1/chats/%00/messages", None),
        ("POST", "/v1/chats/%00/generate", {"message": {"content": "hi"}}),
        ("GET", "/v1/tours/%00", None),
        ("GET", "/v1/connections/%00", None),
    ):
        r = await client.request(method, url, json=body)
        assert 400 <= r.status_code < 500, (method, url, r.status_code, r.text)
        assert "error" in r.json()
    r = await client.get(f"/v1/chats/{chat}/messages")
    assert r.json()["messages"] == []  # nothing of it was stored
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "still fine"}, "stream": False})
    assert r.status_code == 200, r.text


async def test_r14_1_a_nul_character_in_the_history_is_an_openai_error(
        client: httpx.AsyncClient, backend: str) -> None:
    r = await client.post("/v1/chat/completions", json={"model": "@mock", "messages": [
        {"role": "user", "content": "earlier\u0000"}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "now"}]})
    assert r.status_code == (400 if backend == "postgresql" else 200), r.text
    if r.status_code == 400:
        assert r.json()["error"]["type"] == "invalid_request_error"
    r = await client.post("/v1/chat/completions", json={"model": "@mock", "messages": [
        {"role": "user", "content": "now\u0000"}]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input", r.text
