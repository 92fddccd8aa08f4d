"""Embedded mode of `evacore chat`: the core of the local data dir and its HTTP app, served in
this process on a private Unix socket, so the chat without `--url` runs the very same API as a
server. It lives with the CLI (like `serve`) so that channels never import the server.

Must not: listen on any network address (the socket lives in a 0700 temporary folder and is
removed on exit) or outlive the command. The person at the terminal owns the data dir, so
requests act as its master, with a token made for this run only: held in memory, never
shown, revoked on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import uvicorn
from sqlalchemy import select

from evacore.channels.terminal.api import Api
from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.server.app import create_app
from evacore.server.serving import QuietServer
from evacore.store.tables import User
from evacore.store.users import new_user_token, revoke_token

START_SECONDS = 30.0


class _InProcessServer(QuietServer):
    """uvicorn without its signal handlers: Ctrl-C belongs to the chat, not to the server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _run_token(core: Core) -> tuple[str, str, str]:
    """(master user id, token id, clear token): a token of the master for this run only."""
    async with core.session() as s:
        user = (await s.scalars(select(User).where(User.role == "master")
                                .order_by(User.created_at).limit(1))).first()
        if user is None:  # start_core always bootstraps one
            raise RuntimeError("the local database has no master user")
        row, token = await new_user_token(s, user.id)
        return user.id, row.id, token


async def _revoke(core: Core, user_id: str, token_id: str) -> None:
    async with core.session() as s:
        await revoke_token(s, user_id, token_id)


@contextlib.asynccontextmanager
async def embedded_api(settings: Settings, *,
                       on_bootstrap: Callable[[str], Any] | None = None) -> AsyncIterator[Api]:
    """An Api served from the local data dir for as long as the context lasts.

    `on_bootstrap(token)` is called when this start created the master token (first start of
    a data dir), so the caller can show it once.
    """
    core = await start_core(settings)
    try:
        if core.bootstrap_token and on_bootstrap is not None:
            on_bootstrap(core.bootstrap_token)
        app = create_app(core=core)
        user_id, token_id, token = await _run_token(core)
        with tempfile.TemporaryDirectory(prefix="evacore-chat-") as folder:
            os.chmod(folder, 0o700)
            sock = os.path.join(folder, "api.sock")
            server = _InProcessServer(uvicorn.Config(
                app, uds=sock, lifespan="off", log_config=None, access_log=False,
                log_level="warning", timeout_graceful_shutdown=2))
            task = asyncio.create_task(server.serve())
            try:
                await _started(server, task)
                transport = httpx.AsyncHTTPTransport(uds=sock)
                async with httpx.AsyncClient(
                        transport=transport, timeout=30.0, base_url="http://evacore.local",
                        headers={"Authorization": f"Bearer {token}"}) as http:
                    yield Api(http, where=f"the local data dir {settings.data_dir}", socket=sock)
            finally:
                server.should_exit = True
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 10)
                await _revoke(core, user_id, token_id)
    finally:
        await core.aclose()


async def _started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_SECONDS
    while not server.started:
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("the in-process server stopped before it started")
        if loop.time() > deadline:
            raise RuntimeError("the in-process server did not start")
        await asyncio.sleep(0.005)
