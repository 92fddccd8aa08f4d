"""Fixtures for the facade tests: the official `openai` SDK talking to the app in process
(httpx's ASGI transport), a connection aimed at the loopback fake upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from evacore.core import Core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN
from tests.fakes.fixtures import openai_fake  # noqa: F401 - fixtures are found by name
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection

BASE = "http://evacore.test/v1"


@pytest.fixture
def app(core: Core) -> FastAPI:
    return create_app(core=core)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """evacore's own API as the master (rules, chats, messages)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test",
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"},
                                 timeout=30) as c:
        yield c


def sdk(app: FastAPI, token: str = MASTER_TOKEN) -> openai.AsyncOpenAI:
    """The official SDK aimed at the app (no retries: every status reaches the test)."""
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=30)
    return openai.AsyncOpenAI(base_url=BASE, api_key=token, http_client=http, max_retries=0)


@pytest.fixture
async def oai(app: FastAPI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with sdk(app) as c:
        yield c


@pytest.fixture
async def upstream(client: httpx.AsyncClient, openai_fake: FakeUpstream) -> FakeUpstream:  # noqa: F811
    """The fake upstream with a connection named `up` aimed at it (model `@up`)."""
    await fake_connection(client, openai_fake, name="up", params={"retries": 0})
    return openai_fake


async def add_character(client: httpx.AsyncClient, name: str, **fields: Any) -> str:
    card = {"spec": "chara_card_v3", "spec_version": "3.0",
            "data": {"name": name, "description": f"{name} is a test character.", **fields}}
    r = await client.post("/v1/characters", json=card)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def messages(client: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/chats/{chat_id}/messages")
    assert r.status_code == 200, r.text
    return r.json()["messages"]


def sent_messages(fake: FakeUpstream, index: int = -1) -> list[dict[str, Any]]:
    """The messages of one generation request the upstream received."""
    return fake.generation_requests[index].json["messages"]
