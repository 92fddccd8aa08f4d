"""`evacore demo` (R11): an offline, scripted conversation through the whole pipeline on the
`mock` connection, showing a soft stream rule and a hard one firing, then the stats.

Must not: touch the network, need a key, or use the operator's database: it runs a Core on a
temporary data dir (or `--data-dir`) with its own SQLite file, and prints; nothing more.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule as Line
from rich.table import Table
from rich.text import Text

console = Console(highlight=False)

NOTES = "# Picnic\nBring the blanket and the lemonaed.\n"
FIXED = "# Picnic\nBring the blanket and the lemonade.\n"
TAIL = "↩ #1042"
SCRIPT: list[dict[str, Any]] = [
    {"match": "system-interrupt", "step": 0,
     "text": f"No rain tomorrow: sunny and 24 °C. Bring the big blanket! {TAIL}"},
    {"match": "typo", "step": 0, "text": "Let me fix that typo in notes.md.",
     "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": FIXED}}]},
    {"match": "typo", "step": 1, "text": "Done: notes.md now says “lemonade”."},
    {"match": "picnic", "step": 0,
     "text": "No rain tomorrow: sunny and 24 °C. Bring the big blanket!"},
]
TURNS: list[dict[str, Any]] = [
    {"title": "Turn 1 · a soft rule: tool:write_file",
     "intro": "notes.md already exists in the workspace. The model edits it with write_file "
              "instead of write_diff; the seeded rule write_diff_over_write_file reminds it "
              "right on that call's result.",
     "say": "Please fix the typo in notes.md.", "env": None},
    {"title": "Turn 2 · a hard rule: a Telegram tour",
     "intro": "The master runs this tour as Telegram would (env override telegram=true). Its "
              "first answer lacks the reply tail ↩ #<id>, so telegram_reply_tail discards it "
              "before anyone sees it and the step is played again.",
     "say": "#1042 Will it rain at the picnic tomorrow?", "env": {"telegram": True}},
]


def demo(
    data_dir: Annotated[Path | None, typer.Option(
        help="Keep the demo's data here (default: a temporary folder, removed at the end).")]
    = None,
    token_delay: Annotated[float, typer.Option(
        help="Seconds between streamed words (0 for no typewriter effect).")] = 0.02,
) -> None:
    """Offline demo: a scripted chat on the mock provider where a soft and a hard stream rule
    fire; shows the streamed answer, what the model saw, and the stats. No network, no key."""
    from evacore.logs import configure_logging

    configure_logging("console", "WARNING")
    if data_dir is not None:
        asyncio.run(_demo(data_dir, token_delay))
        return
    with tempfile.TemporaryDirectory(prefix="evacore-demo-") as tmp:
        asyncio.run(_demo(Path(tmp), token_delay, temporary=True))


async def _demo(data_dir: Path, token_delay: float, *, temporary: bool = False) -> None:
    from evacore.config import Settings
    from evacore.core import start_core

    data_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        data_dir=data_dir, database_url=f"sqlite+aiosqlite:///{data_dir / 'evacore.db'}",
        workspace=data_dir / "workspace", master_token=secrets.token_urlsafe(24),
        log_format="console", log_level="WARNING",
    )
    console.print(Panel.fit(
        Text.assemble(("evacore demo", "bold magenta"), "\nan offline, scripted conversation "
                      "through the whole 14-stage pipeline on the mock provider\n",
                      (f"data dir: {data_dir}" + (" (temporary)" if temporary else ""), "dim")),
        border_style="magenta"))
    core = await start_core(settings)
    try:
        await _show_rules(core)
        chat_id, user_id = await _setup(core, token_delay)
        for turn in TURNS:
            await _turn(core, chat_id, user_id, turn)
        await _show_stats(core)
    finally:
        await core.aclose()
    console.print(Line(style="magenta"))
    console.print("Next: [bold]evacore rules list[/bold], [bold]evacore rules test NAME "
                  "--text '…'[/bold], [bold]evacore serve[/bold]; the rules are explained in "
                  "docs/rules.md.")


async def _show_rules(core: Any) -> None:
    from evacore.services import rules as service

    async with core.session() as s:
        rules = await service.list_rules(s)
    table = Table("rule", "half", "when", title="Seeded stream rules (silent until a slip)",
                  title_justify="left", title_style="bold")
    for rule in rules:
        half = "soft · " + rule.scope if rule.scope != "text" else "hard · text"
        table.add_row(rule.name, half, ", ".join(rule.when) or "any tour")
    console.print(table)


async def _setup(core: Any, token_delay: float) -> tuple[str, str]:
    from sqlalchemy import select

    from evacore.store.tables import Chat, Connection, User

    workspace = core.settings.workspace_dir
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.md").write_text(NOTES, encoding="utf-8")
    script = [{**step, "token_delay": token_delay} for step in SCRIPT]
    async with core.session() as s:
        master = (await s.scalars(select(User).where(User.role == "master"))).first()
        assert master is not None
        conn = Connection(name="demo (mock)", kind="mock", model="mock", context_size=8192,
                          max_tokens=512, tokenizer="heuristic", params={"script": script})
        s.add(conn)
        await s.flush()
        chat = Chat(title="evacore demo", connection_id=conn.id, user_id=master.id)
        s.add(chat)
        await s.flush()
        return chat.id, master.id


async def _turn(core: Any, chat_id: str, user_id: str, turn: dict[str, Any]) -> None:
    from evacore.pipeline.request import TourRequest

    console.print()
    console.print(Line(f"[bold]{turn['title']}[/bold]", style="cyan", align="left"))
    console.print(Text(turn["intro"], style="italic dim"))
    overrides = turn["env"]
    console.print(Text.assemble(("you › ", "bold green"), turn["say"]))
    running = core.tours.start(TourRequest(chat_id=chat_id, user_id=user_id, role="master",
                                           env=overrides, text=turn["say"]))
    await _render_events(running.tour)
    await running


async def _render_events(tour: Any) -> None:
    """Print the tour's events as they stream. When a step's output begins, show what the
    rules put into that step's request (read from the request as it was sent)."""
    speaking = False
    shown: set[str] = set()
    step = -1  # index of the provider request whose output is being printed
    after_hold: int | None = None
    after_results = False

    def stop_speaking() -> None:
        nonlocal speaking
        if speaking:
            console.print()
            speaking = False

    def begin_step() -> None:
        nonlocal step
        step += 1
        requests = tour.diagnostics.get("requests", [])
        if step < len(requests):
            stop_speaking()
            _insertions(tour, (requests[step].get("body") or {}).get("messages") or [], shown)

    async for name, data in tour.events:
        if name in ("delta", "tool_call"):
            if after_hold is not None:
                discarded = [d for d in tour.diagnostics.get("discarded", [])
                             if d["step"] == after_hold]
                after_hold = None
                if discarded:
                    begin_step()  # the retry: its request ends with the interrupt
            elif after_results or step < 0:
                begin_step()
            after_results = False
        if name == "delta":
            if not speaking:
                console.print(Text("eva › ", style="bold magenta"), end="")
                speaking = True
            console.print(Text(data["text"]), end="")
        elif name == "hold":
            stop_speaking()
            step, after_hold, after_results = step + 1, data["step"], False
            armed = ", ".join(tour.diagnostics.get("rules", {}).get("armed", []))
            console.print(Text(f"  ⏸ hold: text rules are armed ({armed}), so this answer is "
                               "checked before anyone sees it", style="yellow"))
        elif name == "tool_call":
            stop_speaking()
            console.print(Text(f"  ⚙ {data['name']} {data['arguments']}", style="blue"))
        elif name == "tool_result":
            stop_speaking()
            after_results = True
            console.print(Text(f"  ↳ {data['content']}", style="blue")
                          + Text("  (the clean result: what you and the database get)",
                                 style="dim"))
        elif name == "error":
            stop_speaking()
            console.print(Text(f"  error: {data['message']}", style="bold red"))
    stop_speaking()


def _insertions(tour: Any, messages: list[dict[str, Any]], shown: set[str]) -> None:
    """Reminders and interrupts in one request's messages, each shown once, as sent."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, str):
            continue
        key = f"{index}:{content}"
        if key in shown:
            continue
        if message.get("role") == "tool" and content.startswith("<system-reminder"):
            shown.add(key)
            console.print(Panel(Text(content), border_style="green", title_align="left",
                                title="that result as the model got it (prompt copy only)"))
        elif message.get("role") == "user" and content.startswith("<system-interrupt"):
            shown.add(key)
            rules = [d["rule"] for d in tour.diagnostics.get("discarded", [])]
            console.print(Text(f"  ✗ that answer broke {', '.join(rules) or 'a text rule'} and "
                               "was discarded: not streamed, not saved, its calls not run",
                               style="bold red"))
            console.print(Panel(Text(content), border_style="red", title_align="left",
                                title="sent to the model as a user message; the step is replayed"))


async def _show_stats(core: Any) -> None:
    from evacore.cli.stats import rules_stats_table
    from evacore.services import rules as service

    async with core.session() as s:
        data = await service.stats(s)
    console.print()
    console.print(Line("[bold]Stats[/bold] (GET /v1/stats, evacore stats)", style="cyan",
                       align="left"))
    console.print(rules_stats_table(data["rules"]))
    tours = ", ".join(f"{n} {status}" for status, n in sorted(data["tours"].items()))
    tokens = data["tokens"]
    console.print(f"tours: {tours}; tokens: {tokens['prompt']} prompt, "
                  f"{tokens['completion']} completion")
