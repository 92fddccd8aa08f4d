"""R8: schemathesis over every operation of `/openapi.json` with REAL ids: before each
operation a fresh chat (with a character, persona, lorebook, messages and a tour), a
connection, a preset and a memory block are created, and the generated case's path
parameters and the ids its body names are pointed at them, so the fuzzed bodies reach the
code behind the 404 (settings, params and images of real chats). No 5xx.

The server is a real `evacore serve` (SQLite), called as the master.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.fuzz.test_typed_input_api import BOOK, CARD
from tests.helpers import ServerProcess

TOKEN = "evc_fuzz_ids_master_token_0123456789ab"
EXAMPLES = int(os.environ.get("EVACORE_FUZZ_EXAMPLES", "4"))
RUNS = [pytest.param(EXAMPLES, id="quick"),
        pytest.param(EXAMPLES * 15, id="thorough",
                     marks=[pytest.mark.slow, pytest.mark.timeout(3600)])]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("fuzz_ids")
    srv = ServerProcess(data / "data", f"sqlite+aiosqlite:///{data / 'fuzz.db'}", TOKEN,
                        EVACORE_WORKSPACE=str(data / "ws")).start()
    try:
        yield srv
    finally:
        srv.kill()


def _records(http: httpx.Client) -> dict[str, str]:
    """One fresh set of real records; the keys are the path parameter names."""
    def made(url: str, body: Any) -> dict[str, Any]:
        r = http.post(url, json=body)
        assert r.status_code == 201, (url, r.text)
        return r.json()

    ids = {
        "connection_id": made("/v1/connections", {"name": "m", "kind": "mock"})["id"],
        "character_id": made("/v1/characters", CARD)["id"],
        "persona_id": made("/v1/personas", {"name": "Ann"})["id"],
        "lorebook_id": made("/v1/lorebooks", BOOK)["id"],
        "preset_id": made("/v1/presets", {"kind": "instruct", "name": "P",
                                          "data": {"input_sequence": "<u>"}})["id"],
    }
    chat = made("/v1/chats", {"connection_id": ids["connection_id"],
                              "character_id": ids["character_id"],
                              "persona_id": ids["persona_id"],
                              "lorebook_ids": [ids["lorebook_id"]]})["id"]
    answer = http.post(f"/v1/chats/{chat}/generate",
                       json={"message": {"content": "A ship?"}, "stream": False}).json()
    ids.update(chat_id=chat, message_id=answer["message_id"], tour_id=answer["tour_id"],
               block_id=made("/v1/memory", {"chat_id": chat, "label": "facts",
                                            "content": "Ann cooks."})["id"],
               uid="0", name="write_diff_over_write_file", target_kind="chat",
               target_id=chat)
    return ids


_BODY_IDS = ("connection_id", "character_id", "persona_id", "chat_id", "target_id")


def _aim(case: Any, ids: dict[str, str]) -> None:
    """Point the case's path parameters and the ids its JSON body names at real records."""
    for key in list(case.path_parameters or {}):
        if key in ids:
            case.path_parameters[key] = ids[key]
    body = case.body
    if isinstance(body, dict):
        for key in _BODY_IDS:
            if isinstance(body.get(key), str):
                body[key] = ids[key]
        if isinstance(body.get("lorebook_ids"), list):
            body["lorebook_ids"] = [ids["lorebook_id"]]
        if isinstance(body.get("active_variant"), str):
            body["active_variant"] = ids["message_id"]


@pytest.mark.parametrize("examples", RUNS)
def test_r8_schemathesis_with_real_ids_finds_no_5xx(server: ServerProcess, examples: int
                                                    ) -> None:
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    failures: list[str] = []
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as http:
        for result in schema.get_all_operations():
            _fuzz(result.ok(), _records(http), http, examples, failures)
    assert not failures, "\n".join(failures[:20])


def _fuzz(op: Any, ids: dict[str, str], http: httpx.Client, examples: int,
          failures: list[str]) -> None:
    """`examples` cases of one operation, aimed at `ids`; 5xx answers go to `failures`."""
    @given(case=op.as_strategy())
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        _aim(case, ids)
        kwargs = case.as_transport_kwargs(base_url=str(http.base_url).rstrip("/"))
        headers = {**(kwargs.get("headers") or {}), "Authorization": f"Bearer {TOKEN}"}
        method, url = kwargs.pop("method"), kwargs.pop("url")
        send = {k: v for k, v in kwargs.items()
                if k in ("params", "json", "content", "data", "files")}
        r = http.request(method, url, headers=headers, **send)
        if r.status_code >= 500 and not _provider(r):
            failures.append(f"{method} {url} {str(send)[:300]} -> {r.status_code}: "
                            f"{r.text[:300]}")

    run()


def _provider(r: httpx.Response) -> bool:
    try:
        return str(r.json()["error"]["code"]).startswith("provider_")
    except (ValueError, KeyError, TypeError):
        return False
