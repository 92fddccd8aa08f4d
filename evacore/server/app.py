"""The FastAPI app factory: lifespan opens the Core, routers mount under `/v1`.

Must not: contain endpoint logic (routes/) or start the core outside the lifespan.
"""

from __future__ import annotations

import gc
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import compile_path

from evacore import __version__
from evacore.channels.openai import routes as openai_facade
from evacore.channels.openai.errors import FacadeError
from evacore.channels.telegram import webhook as telegram_webhook
from evacore.config import Settings, load_settings
from evacore.core import Core, start_core
from evacore.importing.upload import MULTIPART_SLACK
from evacore.logs import get_logger
from evacore.server.auth import TokenBeforeBody
from evacore.server.errors import install_error_handlers
from evacore.server.hot_route import HotRoute
from evacore.server.limits import BodyLimit, RouteLimit
from evacore.server.routes import (
    characters,
    chat_io,
    chats,
    connections,
    generate,
    health,
    lorebooks,
    memory,
    personas,
    plugins,
    presets,
    rules,
    stats,
    tours,
    users,
)
from evacore.server.routes import settings as settings_routes
from evacore.web import mount_page

log = get_logger(__name__)

ROUTERS = [
    # The two routes every message takes come first: a request is matched against the
    # routes in this order (twice, by FastAPI's included routers), and none of the later
    # paths overlaps theirs.
    generate.router,
    openai_facade.router,
    health.router,
    users.router,
    connections.router,
    chats.router,
    tours.router,
    rules.router,
    stats.router,
    plugins.router,
    characters.router,
    personas.router,
    presets.router,
    chat_io.router,
    lorebooks.router,
    settings_routes.router,
    memory.router,
    telegram_webhook.router,
    # One router per line.
]


def create_app(settings: Settings | None = None, *, core: Core | None = None,
               serving: bool = False) -> FastAPI:
    """Build the app; with `core` given the caller owns its lifetime (tests). `serving`: the
    app is the process's whole work (`evacore serve`), which freezes the start-up heap once
    the core is up (`_freeze_startup_heap`)."""
    if settings is None and core is None:  # `serve --workers`: each worker builds its own
        from evacore.logs import configure_logging

        serving = True
        settings = load_settings()
        configure_logging(settings.log_format, settings.log_level)
    settings = settings or (core.settings if core else load_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = core is None
        app.state.core = core or await start_core(settings)
        if app.state.core.bootstrap_token:
            _announce_token(app.state.core.bootstrap_token)
        try:
            app.state.telegram = await _start_telegram(app.state.core, settings)
            if serving and own:
                _freeze_startup_heap()
            yield
        finally:
            if getattr(app.state, "telegram", None) is not None:
                await app.state.telegram.stop()
                app.state.telegram = None
            if own:
                await app.state.core.aclose()

    app = EvacoreApp(
        title="evacore",
        version=__version__,
        description="A self-hosted LLM conversation core.",
        lifespan=lifespan,
    )
    if core is not None:
        app.state.core = core
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router, prefix="/v1")
    app.include_router(stats.metrics_router)  # Prometheus scrapes `GET /metrics` (R8.6)
    mount_page(app)  # the web page at `/`, its files under `/web/` (R14.4)
    # Outermost first on the way in: the size cap (before anything reads or authenticates),
    # then the token check of requests that carry a body (before FastAPI parses it).
    facade = _paths(openai_facade.router, "/v1")
    webhook = _paths(telegram_webhook.router, "/v1")  # checks Telegram's secret itself
    app.add_middleware(TokenBeforeBody, exempt=tuple(path for _, path in facade + webhook))
    routes = upload_limits(ROUTERS, "/v1", settings.limits.max_upload_bytes)
    routes += [RouteLimit(methods, path, settings.limits.max_body_bytes, _facade_refusal)
               for methods, path in facade]
    app.add_middleware(BodyLimit, default=settings.limits.max_body_bytes, routes=routes)
    app.hot_route = HotRoute(settings.limits.max_body_bytes)
    return app


class EvacoreApp(FastAPI):
    """The app, which lets its hot routes (hot_route.py) answer an ordinary generate or
    facade request before the framework's layers; every other request, and any they are not
    sure of, goes through them."""

    hot_route: HotRoute | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.hot_route is not None:
            receive = await self.hot_route(self, scope, receive, send)
            if receive is None:
                return
        await super().__call__(scope, receive, send)


def _freeze_startup_heap() -> None:
    """Keep what start-up built (modules, routes, compiled statements, the core) out of the
    cyclic garbage collector's full passes. They live as long as the process, yet every
    full pass walked all of them: about 190,000 objects, a pause of tens of milliseconds
    every few dozen tours. Cycles made at start-up are collected first; what is frozen is
    still freed by reference counting. Only `evacore serve` does this: in a process that
    builds apps as a part of its work (tests, the terminal's embedded server) objects that
    are alive now may turn into garbage cycles later, which a frozen heap would keep.

    The youngest generation is collected every `YOUNG_COLLECTION_AT` new containers
    instead of Python's 700: a tour makes thousands of short-lived ones, which reference
    counting frees before a later collection has to walk them (callgrind: 2 % fewer
    instructions a tour through the facade, 4 % fewer per stored message). A collection
    walks every young container still alive, and with hundreds of streams in flight their
    tours hold tens of thousands: at 10,000, 256 streams through the facade made 40 young
    and 3 middle collections in 10 s, about 480 ms of the core (4.7 % of evacore's CPU); at
    100,000, one (18 ms). Nothing a tour makes is left in a cycle
    (tests/pipeline/test_finished_tours_are_freed.py), so the larger young generation holds
    only what is alive anyway; a plugin that makes cyclic garbage leaves up to that many
    containers (some ten MB) between two collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_AT, middle, old)


YOUNG_COLLECTION_AT = 100_000
"""New container objects between two collections of the youngest generation (`evacore
serve` only)."""


async def _start_telegram(core: Core, settings: Settings) -> Any:
    """The Telegram channel, started when `telegram.token` is set (R14.2), else None."""
    if settings.telegram.token is None:
        return None
    try:
        from evacore.channels.telegram.channel import TelegramChannel
    except ImportError as exc:
        raise RuntimeError("telegram.token is set but the Telegram channel is not installed: "
                           "pip install 'evacore[telegram]'") from exc
    channel = TelegramChannel(core, settings.telegram)
    await channel.start()
    return channel


def _paths(router: APIRouter, prefix: str) -> list[tuple[frozenset[str], re.Pattern[str]]]:
    return [(frozenset(route.methods), compile_path(prefix + router.prefix + route.path)[0])
            for route in router.routes if isinstance(route, APIRoute)]


def _facade_refusal(message: str, limit: int) -> Any:
    """The OpenAI facade's 413, in OpenAI's error shape like the rest of its answers."""
    return FacadeError(413, message, code="too_large").response()


def upload_limits(routers: list[APIRouter], prefix: str, max_upload_bytes: int
                  ) -> list[RouteLimit]:
    """Routes that take a file upload (their OpenAPI body is multipart) get the upload limit
    plus room for the multipart envelope; every other body gets `limits.max_body_bytes`."""
    out = []
    for router in routers:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                continue
            extra = route.openapi_extra or {}
            content = (extra.get("requestBody") or {}).get("content") or {}
            if "multipart/form-data" in content:
                path, _, _ = compile_path(prefix + router.prefix + route.path)
                out.append(RouteLimit(frozenset(route.methods), path,
                                      max_upload_bytes + MULTIPART_SLACK))
    return out


def _announce_token(token: str) -> None:
    """Print the bootstrap master token once, to the terminal, never to the log."""
    import sys

    print(
        f"\nevacore: created the master token (shown once, store it now):\n  {token}\n",
        file=sys.stderr,
        flush=True,
    )
