"""Fixtures for the tool tests: a workspace in tmp_path and a context factory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from evacore.agent.registry import ToolContext, ToolPolicy, ToolSettings

BOTH_LOOPS = ("test_shell_tool",)
"""Modules whose tests run on asyncio's event loop and on uvloop's (`evacore serve` runs on
uvloop, whose subprocess and descriptor handling differ)."""


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                  ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    module = getattr(item, "module", None)
    if module is not None and module.__name__.rsplit(".", 1)[-1] in BOTH_LOOPS:
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def make_ctx(workspace: Path) -> Callable[..., ToolContext]:
    def make(role: str = "master", env: frozenset[str] = frozenset(), *,
             services: dict[str, Any] | None = None, policy: ToolPolicy | None = None,
             abort: asyncio.Event | None = None, **settings: Any) -> ToolContext:
        return ToolContext(
            workspace=workspace, role=role, env=env, abort=abort or asyncio.Event(),
            tour_id="tour-1", chat_id="chat-1", services=services or {},
            settings=ToolSettings(**settings), policy=policy or ToolPolicy(),
        )

    return make
