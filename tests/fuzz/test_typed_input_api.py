"""R8 "never a 500 for bad input", as properties over a real `evacore serve` (SQLite) with
real records: chats with a character, a persona and a lorebook, on a connection whose
adapter talks HTTP to a loopback fake. Hypothesis draws chat settings, connection params,
message images, env flags and request params — plausible values mixed with wrong types,
integers past 64 bits, NaN and deep nesting — and each request must be accepted or get a
4xx; whatever was accepted must still let the chat generate, and a refused request must
leave the chat working. Runs in seconds by default; `-m slow` runs many more examples."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.script import Reply
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.fuzz import strategies as fz
from tests.helpers import ServerProcess, parse_sse

TOKEN = "evc_fuzz_typed_master_token_0123456789"
EXAMPLES = int(os.environ.get("EVACORE_FUZZ_EXAMPLES", "12"))
RUNS = [pytest.param(EXAMPLES, id="quick"),
        pytest.param(EXAMPLES * 25, id="thorough",
                     marks=[pytest.mark.slow, pytest.mark.timeout(1800)])]
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Orla", "description": "{{char}} is a sailor.", "scenario": "A harbour.",
    "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Ahoy.", "first_mes": "Ahoy, {{user}}!"}}
BOOK = {"name": "Sea", "entries": [
    {"key": ["ship"], "content": "Ships have sails.", "constant": False},
    {"key": [], "content": "The sea is cold.", "constant": True, "position": 4, "depth": 1}]}


class Api:
    """The server, its fake upstream, real ids to aim at, and the failures seen."""

    def __init__(self, server: ServerProcess, fake: FakeUpstream) -> None:
        self.server, self.fake = server, fake
        self.http = httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)
        self.failures: list[str] = []
        self.ids: dict[str, str] = {}

    def call(self, method: str, url: str, body: Any = None) -> httpx.Response:
        content = json.dumps(body).encode()  # NaN and big integers go out as a client sends them
        r = self.http.request(method, url, content=content,
                              headers={"Content-Type": "application/json"})
        crashed = r.status_code >= 500 and not self._provider_failure(r)
        if r.status_code == 200 and r.headers.get("content-type", "").startswith(
                "text/event-stream"):
            crashed = any(name == "error" and data.get("code") == "internal"
                          for name, data in parse_sse(r.text))
        if crashed:
            self.failures.append(f"{method} {url} {content[:400]!r} -> {r.status_code}: "
                                 f"{r.text[:300]}")
        return r

    @staticmethod
    def _provider_failure(r: httpx.Response) -> bool:
        """A 502/504 from a provider the fuzzed params broke (e.g. `extra_body`) is the
        documented answer, not a crash."""
        try:
            code = r.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return False
        return r.status_code in (502, 504) and str(code).startswith("provider_")

    def created(self, url: str, body: Any) -> str:
        r = self.call("POST", url, body)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def chat(self, **fields: Any) -> httpx.Response:
        return self.call("POST", "/v1/chats", {
            "connection_id": self.ids["connection"], "character_id": self.ids["character"],
            "persona_id": self.ids["persona"], "lorebook_ids": [self.ids["lorebook"]],
            **fields})

    def generate(self, chat_id: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.call("POST", f"/v1/chats/{chat_id}/generate",
                         body or {"message": {"content": "A ship, {{user}}?"}, "stream": False})

    def still_answers(self, chat_id: str) -> None:
        r = self.generate(chat_id)
        if r.status_code != 200 and not self._provider_failure(r):
            self.failures.append(f"chat {chat_id} stopped answering: {r.status_code} "
                                 f"{r.text[:300]}")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    data = tmp_path_factory.mktemp("fuzz_typed")
    with FakeUpstream("openai-chat") as fake:
        server = ServerProcess(data / "data", f"sqlite+aiosqlite:///{data / 'fuzz.db'}", TOKEN,
                               EVACORE_WORKSPACE=str(data / "ws")).start()
        try:
            fake.script.default = Reply(text="Fair winds.")
            api = Api(server, fake)
            api.ids["connection"] = api.created("/v1/connections", {
                "name": "fake", "kind": "openai-chat", "base_url": fake.base_url,
                "api_key": FAKE_API_KEY, "model": "fake-model", "context_size": 4096,
                "max_tokens": 64,
                "params": {"timeouts": {"connect": 2, "first_token": 5, "idle": 5, "total": 20},
                           "retries": 0}})
            api.ids["character"] = api.created("/v1/characters", CARD)
            api.ids["lorebook"] = api.created("/v1/lorebooks", BOOK)
            api.ids["persona"] = api.created("/v1/personas",
                                             {"name": "Ann", "description": "A cook."})
            yield api
        finally:
            api.http.close()
            server.kill()


def _run(prop: Any, examples: int) -> None:
    settings(max_examples=examples, deadline=None, database=None,
             suppress_health_check=list(HealthCheck))(prop)()


def _check(api: Api) -> None:
    failures, api.failures = api.failures, []
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("examples", RUNS)
def test_r8_fuzzed_chat_settings_never_give_a_5xx(api: Api, examples: int) -> None:
    patched = api.chat().json()["id"]

    @given(fz.chat_settings)
    def prop(chat_settings: dict[str, Any]) -> None:
        r = api.chat(settings=chat_settings)
        assert r.status_code in (201, 422), r.text
        if r.status_code == 201:
            api.still_answers(r.json()["id"])
        r = api.call("PATCH", f"/v1/chats/{patched}", {"settings": chat_settings})
        assert r.status_code in (200, 422), r.text
        if r.status_code == 200:
            api.still_answers(patched)

    _run(prop, examples)
    api.still_answers(patched)
    _check(api)


@pytest.mark.parametrize("examples", RUNS)
def test_r12_2_fuzzed_connection_params_never_give_a_5xx(api: Api, examples: int) -> None:
    base = {"name": "fuzzed", "kind": "openai-chat", "base_url": api.fake.base_url,
            "context_size": 4096, "max_tokens": 64}
    patched = api.created("/v1/connections", base)
    patched_chat = api.chat(connection_id=patched).json()["id"]

    @given(fz.connection_params)
    def prop(params: dict[str, Any]) -> None:
        safe = {**params, "timeouts": {"first_token": 5, "total": 20}, "retries": 0}
        r = api.call("POST", "/v1/connections", {**base, "params": safe})
        assert r.status_code in (201, 422), r.text
        if r.status_code == 201:
            api.still_answers(api.chat(connection_id=r.json()["id"]).json()["id"])
        r = api.call("PATCH", f"/v1/connections/{patched}", {"params": safe})
        assert r.status_code in (200, 422), r.text
        if r.status_code == 200:
            api.still_answers(patched_chat)

    _run(prop, examples)
    _check(api)


@pytest.mark.parametrize("examples", RUNS)
def test_r8_3_fuzzed_generate_bodies_never_give_a_5xx_nor_brick_the_chat(
    api: Api, examples: int
) -> None:
    chat = api.chat().json()["id"]

    @given(images=fz.images, env=st.none() | fz.env, params=fz.request_params,
           stream=st.booleans(), mode=st.sampled_from(["normal", "regenerate", "swipe",
                                                       "continue", "impersonate"]))
    def prop(images: list[Any], env: dict[str, Any] | None, params: dict[str, Any],
             stream: bool, mode: str) -> None:
        body: dict[str, Any] = {"message": {"content": "Look, a ship.", "images": images},
                                "params": params, "stream": stream, "mode": mode}
        if env is not None:
            body["env"] = env
        r = api.generate(chat, body)
        assert r.status_code < 500 or api._provider_failure(r), r.text
        api.still_answers(chat)

    _run(prop, examples)
    _check(api)
