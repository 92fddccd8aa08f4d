"""The running core of one instance: settings, the database, and the typed services tours need,
built in one place in dependency order (`start_core`).

Must not: speak HTTP (server/) or any channel's protocol (channels/), or parse CLI
arguments (cli/); they all build a Core and start tours through `core.tours`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from evacore.agent.registry import ToolRegistry
from evacore.agent.tools import default_registry
from evacore.agent.tools.client_ops import ClientOpBroker
from evacore.agent.tools.memory import memory_tools
from evacore.agent.tools.rule_tools import rule_tools
from evacore.config import Settings
from evacore.domain.ids import new_id
from evacore.formats.limits import Limits
from evacore.macros.engine import MacroEngine
from evacore.memory.service import MemoryService
from evacore.pipeline.connect import ProviderPool
from evacore.pipeline.manager import TourManager
from evacore.plugins.host import PluginHost, load_plugins
from evacore.services.instances import Heartbeat, claim, default_instance_id
from evacore.services.lore import LoreService
from evacore.services.rules import run_seeding
from evacore.services.tour_rules import RulesService
from evacore.store import migrate
from evacore.store.connections import ensure_mock
from evacore.store.db import Database, create_engine, dispose_engine
from evacore.store.token_cache import TokenCache
from evacore.store.users import ensure_master
from evacore.tokenize.cache import CountCache

SaveHook = Callable[[AsyncSession, Any], Awaitable[None]]
"""Stage 14 hook: `(session, tour)`, inside the tour's save transaction."""


@dataclass
class Core:
    """Everything a tour runs against. Channels start tours with `core.tours.start(...)`."""

    settings: Settings
    db: Database
    providers: ProviderPool
    tools: ToolRegistry
    """Every tool this instance knows (built-in, memory, rules, plugins); a tour is offered
    the part its role and environment allow."""
    client_ops: ClientOpBroker
    macros: MacroEngine
    count_cache: CountCache
    lore: LoreService
    memory: MemoryService
    rules: RulesService | None
    """None only for a core built without stream rules (benchmarks compare against it)."""
    plugins: PluginHost
    import_limits: Limits = field(default_factory=Limits)
    save_hooks: list[SaveHook] = field(default_factory=list)
    tool_services: dict[str, Any] = field(default_factory=dict)
    """Objects tools reach through `ctx.service(name)` (a channel such as `telegram`)."""
    token_cache: TokenCache = field(init=False)
    """Tokens checked recently (server/auth.py), so a burst of requests reads the database once;
    forgotten on every instance when users or tokens change."""
    instance_id: str = field(default_factory=new_id)
    bootstrap_token: str | None = None
    """The master token created on this start, if any (printed once by the caller)."""
    tours: TourManager = field(init=False)
    heartbeat: Heartbeat = field(init=False)

    def __post_init__(self) -> None:
        self.token_cache = TokenCache(self.db)
        self.tours = TourManager(self)
        self.heartbeat = Heartbeat(self.db, self.instance_id, self.settings.heartbeat_seconds,
                                   self.settings.stale_seconds)

    @property
    def engine(self) -> AsyncEngine:
        return self.db.engine

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]:
        return self.db.sessions

    def session(self) -> AbstractAsyncContextManager[AsyncSession]:
        """A session in one transaction: committed on success, rolled back on error (the
        database's own context manager, with no layer of its own around it)."""
        return self.db.session()

    async def aclose(self) -> None:
        """Stop in reverse order of start: tours first (their answers saved), then the rest."""
        await self.tours.aclose()
        await self.heartbeat.aclose()
        await self.plugins.aclose()
        if self.rules is not None:
            await self.rules.aclose()
        await self.memory.aclose()
        await self.providers.aclose()
        await self.token_cache.aclose()
        await dispose_engine(self.engine)


async def start_core(settings: Settings, *, run_migrations: bool = True,
                     rules: bool = True) -> Core:
    """Open the database, apply migrations, claim this instance's id (settling its
    previous life's tours), bootstrap the master, then build the services in dependency order."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(create_engine(settings.db_url))
    async with migrate.database_lock(db.engine):
        if run_migrations:
            await migrate.upgrade(db.engine, locked=True)
        instance_id, bootstrap_token = await _bootstrap(db, settings)
    tools = default_registry()
    macros = MacroEngine()
    memory = MemoryService(db)
    tour_rules = None
    if rules:
        await run_seeding(db)
        tour_rules = RulesService(db)
    plugins = PluginHost(await load_plugins(db, settings.plugins_dir))
    core = Core(
        settings=settings, db=db, providers=ProviderPool(), tools=tools,
        client_ops=ClientOpBroker(), macros=macros, count_cache=CountCache(),
        lore=LoreService(), memory=memory, rules=tour_rules, plugins=plugins,
        instance_id=instance_id, bootstrap_token=bootstrap_token,
    )
    core.heartbeat.start()
    plugins.start_sync(db)
    core.save_hooks.append(plugins.save_hook)
    if tour_rules is not None:
        core.save_hooks.append(tour_rules.save_firings)
        tools.register_all(rule_tools())
    core.save_hooks.append(memory.save_hook)
    tools.register_all(memory_tools())
    plugins.register_extensions(macros, tools)  # plugin tools never shadow evacore's own
    return core


async def _bootstrap(db: Database, settings: Settings) -> tuple[str, str | None]:
    """This instance's id (its previous life's tours settled), the master, the `mock`
    connection, in one transaction (the caller holds the database lock, so instances starting
    at the same moment take turns). Returns the instance id and a new master token, if any."""
    token = settings.master_token.get_secret_value() if settings.master_token else None
    async with db.session() as s:
        wanted = settings.instance_id or default_instance_id(settings.data_dir)
        instance_id = await claim(s, wanted, settings.stale_seconds)
        created = await ensure_master(s, token)
        await ensure_mock(s)
    return instance_id, created
