"""Fixtures for the agent-loop tests through the HTTP API: per-module agent/context settings,
the core's workspace, and a live loopback server for tests that read a stream while it runs.

Must not: reach outside 127.0.0.1 or change the shared fixtures' behaviour for other folders.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from evacore.config import AgentSettings, ContextSettings, Settings
from evacore.core import Core
from tests.conftest import MASTER_TOKEN
from tests.helpers import free_port


@pytest.fixture
def agent_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """`agent.*` settings of the core: override this fixture in a module, or parametrize it
    indirectly for one test."""
    return dict(getattr(request, "param", {}))


@pytest.fixture
def context_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """`context.*` settings of the core, set like `agent_settings`."""
    return dict(getattr(request, "param", {}))


@pytest.fixture
def settings(settings: Settings, agent_settings: dict[str, Any],
             context_settings: dict[str, Any]) -> Settings:
    return settings.model_copy(update={
        "agent": AgentSettings(**agent_settings),
        "context": ContextSettings(**context_settings),
    })


@pytest.fixture
def workspace(core: Core) -> Path:
    folder = core.settings.workspace_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
async def live(core: Core) -> AsyncIterator[httpx.AsyncClient]:
    """A real HTTP server on loopback serving `core`, and a master client for it; unlike the
    ASGI client, its responses stream while the tour runs."""
    from evacore.server.app import create_app

    server = uvicorn.Server(uvicorn.Config(
        create_app(core=core), host="127.0.0.1", port=free_port(), log_level="warning",
        lifespan="off",
    ))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the loopback server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:
        yield c
    server.should_exit = True
    await asyncio.wait_for(task, 10)
