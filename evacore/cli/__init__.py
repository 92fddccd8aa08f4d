"""The `evacore` command line (Typer + Rich): serve, db, token, users and more.

Must not: hold logic beyond argument handling and printing; it drives the Core.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from evacore.config import load_settings

app = typer.Typer(no_args_is_help=True, help="evacore: a self-hosted LLM conversation core.")
db_app = typer.Typer(no_args_is_help=True, help="Database maintenance.")
token_app = typer.Typer(no_args_is_help=True, help="API tokens.")
users_app = typer.Typer(no_args_is_help=True, help="Users.")
app.add_typer(db_app, name="db")
app.add_typer(token_app, name="token")
app.add_typer(users_app, name="users")

console = Console()
err = Console(stderr=True)


@app.callback()
def _logs_to_stderr() -> None:
    """Every command logs to stderr, so what it prints on stdout (a token, JSON) stays clean."""
    from evacore.logs import configure_logging

    try:
        settings = load_settings()
        configure_logging(settings.log_format, settings.log_level)
    except Exception:  # noqa: BLE001 - a bad setting is reported by the command itself
        configure_logging()


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    workers: Annotated[int, typer.Option(
        min=1, max=64, help="Server processes on one port and one database.")] = 1,
) -> None:
    """Run the HTTP server (default 127.0.0.1:8700)."""
    import uvicorn
    from uvicorn.main import STARTUP_FAILURE

    from evacore.logs import configure_logging
    from evacore.server.app import create_app
    from evacore.server.serving import QuietServer

    settings = load_settings()
    configure_logging(settings.log_format, settings.log_level)
    options = {"host": host or settings.host, "port": port or settings.port,
               "log_config": None, "access_log": False, "timeout_graceful_shutdown": 5}
    if workers > 1:
        # Each worker is an instance of its own (its own id, heartbeat and tours); they
        # share the database, and any of them answers any request.
        from evacore.server.workers import serve_workers

        with contextlib.suppress(KeyboardInterrupt):
            serve_workers(uvicorn.Config("evacore.server.app:create_app", factory=True,
                                         workers=workers, **options))
        return
    server = QuietServer(uvicorn.Config(create_app(settings, serving=True), **options))
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise typer.Exit(STARTUP_FAILURE)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply all database migrations."""
    from evacore.store import migrate
    from evacore.store.db import create_engine, dispose_engine

    settings = load_settings()

    async def run() -> str | None:
        engine = create_engine(settings.db_url)
        try:
            await migrate.upgrade(engine)
            return await migrate.current(engine)
        finally:
            await dispose_engine(engine)

    revision = asyncio.run(run())
    console.print(f"database at revision [bold]{revision}[/bold]")


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option(help="master, trusted or guest.")] = "guest",
    name: Annotated[str | None, typer.Option(help="Name of the new user.")] = None,
) -> None:
    """Create a user with ROLE and print its token (shown once)."""
    from evacore.errors import EvacoreError
    from evacore.store.users import create_user

    async def run() -> str:
        from evacore.core import start_core

        core = await start_core(load_settings())
        _announce_bootstrap(core)
        try:
            async with core.session() as s:
                _, token = await create_user(s, name or role, role)
            return token
        finally:
            await core.aclose()

    try:
        token = asyncio.run(run())
    except EvacoreError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    print(token)


@token_app.command("revoke")
def token_revoke(
    token: Annotated[str, typer.Argument(help="The token to revoke, in clear.")],
) -> None:
    """Revoke a token: every instance refuses it within a second."""
    from evacore.errors import EvacoreError
    from evacore.store import migrate
    from evacore.store.db import Database, create_engine, dispose_engine
    from evacore.store.users import revoke_by_token

    async def run() -> str:
        db = Database(create_engine(load_settings().db_url))
        try:
            await migrate.upgrade(db.engine)
            async with db.session() as s:
                user = await revoke_by_token(s, token)
                return user.name
        finally:
            await dispose_engine(db.engine)

    try:
        name = asyncio.run(run())
    except EvacoreError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    console.print(f"revoked a token of [bold]{name}[/bold]")


@users_app.command("list")
def users_list() -> None:
    """List users and their roles."""
    from evacore.store.users import list_users

    async def run() -> list[tuple[str, str, str, str]]:
        from evacore.core import start_core

        core = await start_core(load_settings())
        _announce_bootstrap(core)
        try:
            async with core.session() as s:
                return [
                    (u.id, u.name, u.role, u.created_at.isoformat()) for u in await list_users(s)
                ]
        finally:
            await core.aclose()

    table = Table("id", "name", "role", "created")
    for row in asyncio.run(run()):
        table.add_row(*row)
    console.print(table)


def _announce_bootstrap(core: object) -> None:
    token = getattr(core, "bootstrap_token", None)
    if token:
        err.print(f"created the master token (shown once, store it now): {token}")


def _register_groups() -> None:
    """Command groups living in their own modules (one module per group)."""
    from evacore.cli import bench, chat, demo, rules, stats, transfer

    transfer.register(app)
    app.add_typer(rules.app, name="rules")
    app.command("stats")(stats.stats)
    app.command("demo")(demo.demo)
    app.command("bench")(bench.bench)
    chat.register(app)


_register_groups()


def main() -> None:  # pragma: no cover
    app()
