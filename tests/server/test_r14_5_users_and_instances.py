"""R14.5 / R8.1: several instances on one database. Any number may start at once on an empty
database (migrations take a lock); users and tokens can be changed, revoked and deleted, and
every instance refuses a revoked token within a second; a changed EVACORE_MASTER_TOKEN
retires the old one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.server.app import create_app
from evacore.store import migrate
from evacore.store.db import create_engine
from tests.conftest import MASTER_TOKEN, _pg_admin_url, _pg_exec, make_user


def _client(core: Core, token: str = MASTER_TOKEN) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core=core)),
                             base_url="http://evacore.test",
                             headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.fixture
async def second(settings: Settings, core: Core) -> AsyncIterator[Core]:
    """Another instance on the same database as `core`."""
    other = await start_core(settings.model_copy(update={"instance_id": "instance-b"}))
    try:
        yield other
    finally:
        await other.aclose()


@pytest.fixture
async def empty_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    admin = _pg_admin_url()
    name = f"evacore_e_{uuid.uuid4().hex[:8]}"
    await _pg_exec(admin, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        await _pg_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_r14_5_instances_started_at_once_on_an_empty_database_all_come_up(
    empty_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "EVACORE_DATABASE_URL": empty_url,
           "EVACORE_MASTER_TOKEN": MASTER_TOKEN, "EVACORE_LOG_FORMAT": "json"}
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 - started at once, waited for in threads
            [sys.executable, "-m", "evacore", "token", "create", "--role", "guest"],
                         env={**env, "EVACORE_DATA_DIR": str(tmp_path / f"d{i}")},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(4)
    ]
    results = [await asyncio.to_thread(p.communicate, timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err.decode()[-2000:]
        assert out.decode().strip().startswith("evc_")
    engine = create_engine(empty_url)
    try:
        assert await migrate.current(engine) is not None
    finally:
        await engine.dispose()


async def test_r14_5_users_change_role_get_tokens_and_are_deleted(
    client: httpx.AsyncClient, core: Core
) -> None:
    token = await make_user(client, "guest", "ann")
    users = (await client.get("/v1/users")).json()["users"]
    ann = next(u for u in users if u["name"] == "ann")
    async with _client(core, token) as as_ann:
        assert (await as_ann.get("/v1/me")).json()["role"] == "guest"
        assert (await as_ann.get("/v1/users")).status_code == 403
        r = await client.patch(f"/v1/users/{ann['id']}", json={"role": "trusted"})
        assert r.status_code == 200 and r.json()["role"] == "trusted"
        assert (await as_ann.get("/v1/me")).json()["role"] == "trusted"

        tokens = (await client.get(f"/v1/users/{ann['id']}/tokens")).json()["tokens"]
        assert len(tokens) == 1 and "token" not in tokens[0] and "token_hash" not in tokens[0]
        created = (await client.post(f"/v1/users/{ann['id']}/tokens")).json()
        assert created["token"].startswith("evc_")
        r = await client.delete(f"/v1/users/{ann['id']}/tokens/{tokens[0]['id']}")
        assert r.status_code == 204
        assert (await as_ann.get("/v1/me")).status_code == 401
    async with _client(core, created["token"]) as as_ann2:
        assert (await as_ann2.get("/v1/me")).status_code == 200
        assert (await client.delete(f"/v1/users/{ann['id']}")).status_code == 204
        assert (await as_ann2.get("/v1/me")).status_code == 401
    assert (await client.delete(f"/v1/users/{ann['id']}")).status_code == 404
    assert (await client.patch("/v1/users/nope", json={"role": "guest"})).status_code == 404
    assert (await client.patch(f"/v1/users/{users[0]['id']}",
                               json={"role": "sideways"})).status_code == 422


async def test_r14_5_the_last_master_stays(client: httpx.AsyncClient) -> None:
    me = (await client.get("/v1/me")).json()
    r = await client.patch(f"/v1/users/{me['id']}", json={"role": "guest"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert (await client.delete(f"/v1/users/{me['id']}")).status_code == 409
    assert (await client.get("/v1/me")).json()["role"] == "master"


@pytest.mark.latency
async def test_r14_5_a_revoked_token_is_refused_on_every_instance_within_a_second(
    client: httpx.AsyncClient, core: Core, second: Core
) -> None:
    token = await make_user(client, "trusted", "bob")
    bob = next(u for u in (await client.get("/v1/users")).json()["users"] if u["name"] == "bob")
    token_id = (await client.get(f"/v1/users/{bob['id']}/tokens")).json()["tokens"][0]["id"]
    async with _client(core, token) as on_a, _client(second, token) as on_b:
        assert (await on_a.get("/v1/me")).status_code == 200
        assert (await on_b.get("/v1/me")).status_code == 200  # now trusted on B for a while
        assert (await client.delete(f"/v1/users/{bob['id']}/tokens/{token_id}")).status_code == 204
        revoked = time.monotonic()
        assert (await on_a.get("/v1/me")).status_code == 401
        while (await on_b.get("/v1/me")).status_code == 200:
            assert time.monotonic() - revoked < 1.0, "instance B still takes the revoked token"
            await asyncio.sleep(0.05)


@pytest.mark.latency
async def test_r14_5_a_role_change_reaches_every_instance_within_a_second(
    client: httpx.AsyncClient, second: Core
) -> None:
    token = await make_user(client, "trusted", "cy")
    cy = next(u for u in (await client.get("/v1/users")).json()["users"] if u["name"] == "cy")
    async with _client(second, token) as on_b:
        assert (await on_b.get("/v1/me")).json()["role"] == "trusted"
        await client.patch(f"/v1/users/{cy['id']}", json={"role": "guest"})
        changed = time.monotonic()
        while (await on_b.get("/v1/me")).json()["role"] != "guest":
            assert time.monotonic() - changed < 1.0
            await asyncio.sleep(0.05)


async def test_r8_1_a_changed_master_token_retires_the_old_one(
    settings: Settings, core: Core
) -> None:
    new = "evc_the_new_master_token_987654321"
    restarted = await start_core(settings.model_copy(update={"master_token": SecretStr(new)}))
    try:
        async with _client(restarted, MASTER_TOKEN) as old, _client(restarted, new) as fresh:
            assert (await old.get("/v1/me")).status_code == 401
            assert (await fresh.get("/v1/me")).json()["role"] == "master"
    finally:
        await restarted.aclose()
    async with _client(core, MASTER_TOKEN) as old:
        deadline = time.monotonic() + 1.0
        while (await old.get("/v1/me")).status_code != 401:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)


async def test_r8_1_tokens_cli_revoke(settings: Settings, core: Core, tmp_path: Path) -> None:
    async with _client(core) as client:
        token = await make_user(client, "guest", "dee")
        env = {**os.environ, "EVACORE_DATABASE_URL": settings.db_url,
               "EVACORE_DATA_DIR": str(tmp_path / "cli"), "EVACORE_MASTER_TOKEN": MASTER_TOKEN}
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "evacore", "token", "revoke", token],
            env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "dee" in done.stdout
        async with _client(core, token) as as_dee:
            deadline = time.monotonic() + 1.0
            while (await as_dee.get("/v1/me")).status_code != 401:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        again = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "evacore", "token", "revoke", token],
            env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 2 and "no such token" in again.stderr
