"""R8, R8.1: bearer auth, roles, token handling."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.conftest import MASTER_TOKEN, make_user


async def test_r8_health_answers_without_token(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/health", headers={"Authorization": ""})
    assert r.status_code == 200
    assert r.json()["database"] == "ok"


async def test_r8_no_token_is_401_with_error_body(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/users", headers={"Authorization": ""})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    r = await client.get("/v1/users", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401


@pytest.mark.parametrize("role", ["guest", "trusted"])
async def test_r8_non_master_on_master_endpoint_is_403(
    client: httpx.AsyncClient, role: str
) -> None:
    token = await make_user(client, role)
    r = await client.get("/v1/users", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "forbidden"
    r = await client.post(
        "/v1/users", json={"name": "x", "role": "master"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 403
    me = await client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["role"] == role


async def test_r8_1_token_shown_once_and_stored_hashed(
    client: httpx.AsyncClient, core, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    r = await client.post("/v1/users", json={"name": "ann", "role": "trusted"})
    token = r.json()["token"]
    listed = await client.get("/v1/users")
    assert token not in listed.text and MASTER_TOKEN not in listed.text
    me = await client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert token not in me.text
    from sqlalchemy import select

    from evacore.store.tables import ApiToken

    async with core.session() as s:
        hashes = (await s.scalars(select(ApiToken.token_hash))).all()
    assert token not in hashes and all(len(h) == 64 for h in hashes)
    assert token not in caplog.text and MASTER_TOKEN not in caplog.text


async def test_r8_bad_input_is_422_not_500(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/users", json={"name": "", "role": "king"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_input"
    r = await client.post(
        "/v1/users", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    r = await client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
