"""R8: a schemathesis run over every endpoint in `/openapi.json` finds no 5xx.

The server is a real `evacore serve` process on loopback (SQLite), authenticated as the
master so every endpoint is reachable. Each operation gets a bounded number of examples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.helpers import ServerProcess

TOKEN = "evc_fuzz_master_token_0123456789abcdef"
EXAMPLES = int(os.environ.get("EVACORE_FUZZ_EXAMPLES", "8"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("fuzz")
    srv = ServerProcess(
        data / "data", f"sqlite+aiosqlite:///{data / 'fuzz.db'}", TOKEN,
        EVACORE_WORKSPACE=str(data / "ws"),
    ).start()
    try:
        yield srv
    finally:
        srv.kill()


def test_r8_schemathesis_finds_no_5xx(server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    failures: list[str] = []
    ops = list(schema.get_all_operations())
    assert len(ops) >= 10
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for result in ops:
            op = result.ok()
            strategy = op.as_strategy()

            @given(case=strategy)
            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def run(case) -> None:  # type: ignore[no-untyped-def]
                kwargs = case.as_transport_kwargs(base_url=server.url)
                headers = dict(kwargs.get("headers") or {})
                headers["Authorization"] = f"Bearer {TOKEN}"
                kwargs["headers"] = headers
                method = kwargs.pop("method")
                url = kwargs.pop("url")
                kwargs.pop("cookies", None)
                r = client.request(method, url, **{k: v for k, v in kwargs.items()
                                                   if k in ("params", "headers", "json",
                                                            "content", "data", "files")})
                if r.status_code >= 500:
                    failures.append(f"{method} {url} -> {r.status_code}: {r.text[:300]}")

            run()
    assert not failures, "\n".join(failures[:20])
