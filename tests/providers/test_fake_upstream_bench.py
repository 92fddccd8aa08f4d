"""bench/fake_upstream.py: the fast fake used by the relay benchmark streams what it promises."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from evacore.providers import Connection, ProviderRequest, collect, make_provider


def _bench_module() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "fake_upstream.py"
    spec = importlib.util.spec_from_file_location("bench_fake_upstream", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fake_upstream = _bench_module()


@pytest.mark.parametrize("kind", ["openai-chat", "openai-text"])
async def test_bench_fake_upstream_streams_all_tokens(
    kind: str, http_client: httpx.AsyncClient
) -> None:
    with fake_upstream.FastFakeUpstream(tokens=200) as upstream:
        conn = Connection(id="b", name="bench", kind=kind, base_url=upstream.base_url, model="m")
        provider = make_provider(conn, client=http_client)
        request = (ProviderRequest(messages=[{"role": "user", "content": "hi"}])
                   if kind == "openai-chat" else ProviderRequest(prompt="hi"))
        answer = await collect(provider.stream(request))
        assert answer.text == " tok" * 200
        assert answer.usage is not None and answer.usage.completion_tokens == 200
        assert (await provider.complete(request)).text == " tok" * 200


async def test_bench_fake_upstream_paces_tokens(http_client: httpx.AsyncClient) -> None:
    with fake_upstream.FastFakeUpstream(tokens=5, delay_ms=20, first_token_ms=50) as upstream:
        conn = Connection(id="b", name="bench", kind="openai-chat", base_url=upstream.base_url)
        provider = make_provider(conn, client=http_client)
        start = time.monotonic()
        answer = await collect(provider.stream(
            ProviderRequest(messages=[{"role": "user", "content": "hi"}])))
        assert answer.text == " tok" * 5
        assert time.monotonic() - start >= 0.05 + 4 * 0.02


def test_bench_fake_upstream_refuses_non_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"), fake_upstream.FastFakeUpstream(
        host="0.0.0.0"
    ):
        pass
