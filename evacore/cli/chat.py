"""`evacore chat` and `evacore client` (R14.3, R9.2, R11): a terminal chat, and a client app that
offers operations on the master's own machine.

Must not: hold chat logic; it turns arguments into `TerminalOptions` (channels/terminal).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from evacore.config import load_settings

err = Console(stderr=True)

Url = Annotated[str | None, typer.Option(
    "--url", envvar="EVACORE_URL",
    help="A running evacore server; without it the chat runs on the local data dir.")]
Token = Annotated[str | None, typer.Option(
    "--token", envvar="EVACORE_TOKEN", help="Your API token for --url.")]
ChatId = Annotated[str | None, typer.Option("--chat", help="Continue this chat (its id).")]
Character = Annotated[str | None, typer.Option(
    "--character", help="A new chat with this character (name or id).")]
ConnectionName = Annotated[str | None, typer.Option(
    "--connection", help="Use this connection (name or id).")]
Message = Annotated[str | None, typer.Option(
    "--message", "-m", help="Send this one message, print the answer and exit "
    "(0 when the tour completed).")]


def _run(options: object) -> None:
    from evacore.logs import configure_logging

    # before the core's imports, which log as they load (the migrations' library)
    settings = load_settings()
    level = settings.log_level if "log_level" in settings.model_fields_set else "WARNING"
    configure_logging(settings.log_format, level)

    from evacore.channels.terminal.launch import run_terminal
    from evacore.cli._embedded import embedded_api

    code = asyncio.run(run_terminal(options, settings,  # type: ignore[arg-type]
                                    local_api=embedded_api))
    raise typer.Exit(code)


def _check_target(url: str | None, token: str | None, chat: str | None,
                  character: str | None) -> None:
    if url and not token:
        err.print("[red]error:[/red] --url needs --token (or EVACORE_TOKEN)")
        raise typer.Exit(2)
    if chat and character:
        err.print("[red]error:[/red] give --chat or --character, not both")
        raise typer.Exit(2)


def chat(url: Url = None, token: Token = None, chat: ChatId = None,
         character: Character = None, connection: ConnectionName = None,
         message: Message = None) -> None:
    """A terminal chat that streams answers; /help lists its commands.

    Without --url it runs on the local data dir (EVACORE_DATA_DIR), with no server.
    """
    from evacore.channels.terminal.launch import TerminalOptions

    _check_target(url, token, chat, character)
    _run(TerminalOptions(url=url, token=token, chat_id=chat, character=character,
                         connection=connection, message=message))


def client(
    url: Annotated[str, typer.Option("--url", envvar="EVACORE_URL",
                                     help="The evacore server.")],
    token: Annotated[str, typer.Option("--token", envvar="EVACORE_TOKEN",
                                       help="The master's API token.")],
    root: Annotated[Path, typer.Option(
        "--root", exists=True, file_okay=False, dir_okay=True, resolve_path=True,
        help="The folder the ops work in; nothing outside it is read or written.")],
    chat: ChatId = None,
    allow: Annotated[list[str] | None, typer.Option(
        "--allow", help="Ops to offer, comma-separated (default: "
        "shell,read_file,write_file,list_dir).")] = None,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Run ops without asking first.")] = False,
    message: Message = None,
    character: Character = None,
    connection: ConnectionName = None,
    shell_timeout: Annotated[float, typer.Option(
        "--shell-timeout", min=0.1, help="Seconds a shell op may run (default and most).")] = 50.0,
    output_cap: Annotated[int, typer.Option(
        "--output-cap", min=1, help="Bytes of shell output kept.")] = 100_000,
) -> None:
    """A client app: the chat, with operations on this machine offered to the model.

    Each op runs inside --root only and asks before it runs unless --yes.
    """
    from evacore.channels.terminal.launch import TerminalOptions
    from evacore.channels.terminal.ops import parse_allow

    _check_target(url, token, chat, character)
    try:
        allowed = parse_allow(allow)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    _run(TerminalOptions(url=url, token=token, chat_id=chat, character=character,
                         connection=connection, message=message, root=root, allow=allowed,
                         yes=yes, shell_timeout=shell_timeout, output_cap=output_cap))


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
    app.command("client")(client)
