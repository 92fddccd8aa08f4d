"""R2.6: the backend's tokenize endpoint, cached, with a heuristic fallback."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from evacore.tokenize import RemoteProfile, get_profile, heuristic_estimate

Start = Callable[[Starlette], str]


def _app(kind: str, seen: list[dict]) -> Starlette:
    async def tokenize(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if kind == "llamacpp":
            return JSONResponse({"tokens": list(range(len(body["content"].split())))})
        return JSONResponse({"count": len(body["prompt"].split()), "max_model_len": 8192,
                             "tokens": []})

    async def tokencount(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        return JSONResponse({"value": len(body["prompt"].split()), "ids": []})

    routes = {"llamacpp": [Route("/tokenize", tokenize, methods=["POST"])],
              "vllm": [Route("/tokenize", tokenize, methods=["POST"])],
              "kobold": [Route("/api/extra/tokencount", tokencount, methods=["POST"])]}[kind]
    return Starlette(routes=routes)


@pytest.mark.parametrize("kind", ["llamacpp", "vllm", "kobold"])
async def test_r2_6_remote_counts_via_backend_and_caches(
    loopback_server: Start, kind: str
) -> None:
    seen: list[dict] = []
    url = loopback_server(_app(kind, seen))
    async with httpx.AsyncClient() as client:
        profile = RemoteProfile(url + "/v1", model="m", http_client=client)
        assert await profile.count_async("one two three") == 3
        assert await profile.count_async("one two three") == 3
        assert profile.count("one two three") == 3  # sync reads the cache
        assert len(seen) == 1 and profile.exact and not profile.degraded
        assert profile.endpoint == ("/api/extra/tokencount" if kind == "kobold" else "/tokenize")
        if kind != "kobold":
            assert seen[0]["add_special_tokens"] is False and seen[0]["model"] == "m"


async def test_r2_6_remote_falls_back_to_heuristic_when_down(
    free_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    text = "a sentence that the dead endpoint cannot count"
    async with httpx.AsyncClient() as client:
        profile = RemoteProfile(f"http://127.0.0.1:{free_port}", http_client=client,
                                timeout=1.0)
        assert await profile.count_async(text) == heuristic_estimate(text)
        assert profile.degraded
        assert len(profile.cache) == 0  # an estimate is never cached as exact


async def test_r2_6_remote_recovers_after_pause(loopback_server: Start, free_port: int) -> None:
    seen: list[dict] = []
    async with httpx.AsyncClient() as client:
        profile = RemoteProfile(f"http://127.0.0.1:{free_port}", http_client=client,
                                retry_after=0.0)
        await profile.count_async("x y")
        assert profile.degraded
        profile.base_url = loopback_server(_app("llamacpp", seen))
        assert await profile.count_async("x y z") == 3
        assert not profile.degraded


async def test_r2_6_remote_bad_answer_falls_back(loopback_server: Start) -> None:
    async def broken(request: Request) -> JSONResponse:
        return JSONResponse({"unexpected": True})

    url = loopback_server(Starlette(routes=[Route("/tokenize", broken, methods=["POST"])]))
    async with httpx.AsyncClient() as client:
        profile = RemoteProfile(url, http_client=client)
        assert await profile.count_async("a b") == heuristic_estimate("a b")
        assert profile.degraded


def test_r2_6_get_profile_remote_is_shared_per_backend() -> None:
    first = get_profile("remote", base_url="http://127.0.0.1:9/v1", model="x")
    second = get_profile("remote", base_url="http://127.0.0.1:9/", model="x")
    assert first is second and first.name == "remote:http://127.0.0.1:9#x"


async def test_the_sync_count_never_keeps_an_estimate_under_the_remote_profile(
    loopback_server: Start,
) -> None:
    from evacore.tokenize import CountCache, cached_count, cached_count_async

    seen: list[dict] = []
    url = loopback_server(_app("llamacpp", seen))
    async with httpx.AsyncClient() as client:
        profile = RemoteProfile(url, http_client=client)
        cache = CountCache()
        text = "one two three four five six seven"
        assert cached_count(cache, profile, text) == heuristic_estimate(text)  # an estimate
        assert await cached_count_async(cache, profile, text) == 7  # the backend is asked
        assert len(seen) == 1
        assert cached_count(cache, profile, text) == 7  # now the exact count


async def test_a_remote_tokenizer_counts_a_tour_through_the_backend(
    loopback_server: Start, client: httpx.AsyncClient,
) -> None:
    seen: list[dict] = []
    url = loopback_server(_app("llamacpp", seen))
    r = await client.post("/v1/connections", json={
        "name": "remote", "kind": "mock", "base_url": url, "tokenizer": "remote"})
    assert r.status_code == 201, r.text
    chat = (await client.post("/v1/chats", json={"connection_id": r.json()["id"]})).json()
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "alpha beta gamma"}, "stream": False})
    assert r.status_code == 200, r.text
    tokens = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()["diagnostics"][
        "tokens"]
    assert tokens["profile"].startswith("remote:")
    asked = [b["content"] for b in seen]
    assert "alpha beta gamma" in asked  # the input was counted by the backend
    # every element was counted by the backend (the fake counts words), plus 3 per element
    # (empty ones too) and 3 for the reply priming: no heuristic estimate is in the total
    assert tokens["prompt"] == (sum(len(a.split()) for a in set(asked))
                                + 3 * tokens["elements"] + 3)
