"""`evacore rules list|add|edit|rm|test` (R6.9, R11): manage stream rules from the terminal.

Must not: validate rules itself; the shared operations do, exactly as for the HTTP API and the
model's tools. Bad input exits with code 2 and a message saying what to fix.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

app = typer.Typer(no_args_is_help=True, help="Stream rules: list, add, edit, remove, test.")
console = Console()
err = Console(stderr=True)
T = TypeVar("T")

WhenOpt = Annotated[
    list[str] | None,
    typer.Option("--when", help="An env flag that must hold (repeatable; comma lists work; "
                 "'' for none): telegram, client_ops, master, trusted, picture."),
]


def run_with_core(action: Callable[[Any], Awaitable[T]]) -> T:
    """Start a Core from the usual settings, run `action(core)`, close it. Bad input → exit 2."""
    from evacore.errors import EvacoreError

    async def main() -> T:
        from evacore.config import load_settings
        from evacore.core import start_core

        core = await start_core(load_settings())
        if core.bootstrap_token:
            err.print(f"created the master token (shown once, store it now): "
                      f"{core.bootstrap_token}")
        try:
            return await action(core)
        finally:
            await core.aclose()

    try:
        return asyncio.run(main())
    except EvacoreError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        raise typer.Exit(2) from exc


def in_session(action: Callable[[Any], Awaitable[T]]) -> T:
    async def run(core: Any) -> T:
        async with core.session() as s:
            return await action(s)

    return run_with_core(run)


def _check(action: Callable[[], object]) -> None:
    """Run a pure check; its EvacoreError exits 2 with the message, like the commands do."""
    from evacore.errors import EvacoreError

    try:
        action()
    except EvacoreError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        raise typer.Exit(2) from exc


def _when(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [flag.strip() for value in values for flag in value.split(",") if flag.strip()]


def _repeat(value: str | None) -> str | None:
    return None if value in (None, "") else value


def rules_table(rules: list[Any]) -> Table:
    table = Table("name", "scope", "condition", "when", "repeat", "on", "text",
                  title="stream rules", title_justify="left", expand=False)
    for rule in rules:
        condition = ("NOT " if rule.negate else "") + (rule.condition or "(every target)")
        table.add_row(
            Text(rule.name, style="bold" if rule.enabled else "dim"),
            rule.scope,
            Text(_short(condition, 40), style="cyan"),
            ", ".join(rule.when) or "—",
            rule.repeat or "—",
            "✓" if rule.enabled else "✗",
            _short(rule.text, 60) + (" [seeded]" if rule.seeded else ""),
        )
    return table


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_rule(rule: Any, verb: str) -> None:
    from evacore.rules import rule_to_json

    console.print(f"[green]{verb}[/green] [bold]{rule.name}[/bold]")
    console.print_json(json.dumps(rule_to_json(rule), ensure_ascii=False))


@app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List every stream rule."""
    from evacore.rules import rule_to_json
    from evacore.services import rules as service

    rules = in_session(service.list_rules)
    if as_json:
        print(json.dumps({"rules": [rule_to_json(r) for r in rules]}, ensure_ascii=False))
        return
    console.print(rules_table(rules))


@app.command("add")
def add_cmd(
    name: Annotated[str, typer.Option(help="Unique name, [a-z0-9_]+.")],
    scope: Annotated[str, typer.Option(help="'text' or 'tool:<tool name>'.")],
    text: Annotated[str, typer.Option(help="What the model is told (1-400 characters).")],
    condition: Annotated[str, typer.Option(help="RE2 regex; empty matches every target.")] = "",
    negate: Annotated[bool, typer.Option(help="Fire when the condition is NOT found.")] = False,
    when: WhenOpt = None,
    repeat: Annotated[str | None, typer.Option(help="'once' or 'after:N'; default: every "
                                               "tour.")] = None,
    mode: Annotated[str | None, typer.Option(help="remind|interrupt; follows from the scope.")]
    = None,
    enabled: Annotated[bool, typer.Option("--enabled/--disabled")] = True,
) -> None:
    """Create a stream rule."""
    from evacore.rules import validate_rule
    from evacore.services import rules as service

    data: dict[str, Any] = {"name": name, "scope": scope, "text": text, "condition": condition,
                            "negate": negate, "when": _when(when) or [],
                            "repeat": _repeat(repeat), "enabled": enabled}
    if mode is not None:
        data["mode"] = mode
    _check(lambda: validate_rule(data))  # a bad rule is refused before the database is opened
    _print_rule(in_session(lambda s: service.create_rule(s, data)), "created")


@app.command("edit")
def edit_cmd(
    name: Annotated[str, typer.Argument(help="The rule to change.")],
    scope: Annotated[str | None, typer.Option()] = None,
    condition: Annotated[str | None, typer.Option()] = None,
    negate: Annotated[bool | None, typer.Option("--negate/--no-negate")] = None,
    when: WhenOpt = None,
    text: Annotated[str | None, typer.Option()] = None,
    repeat: Annotated[str | None, typer.Option(help="'once', 'after:N', or '' for every "
                                               "tour.")] = None,
    enabled: Annotated[bool | None, typer.Option("--enabled/--disabled")] = None,
) -> None:
    """Change fields of a stream rule; fields not given stay as they are."""
    from evacore.services import rules as service

    patch: dict[str, Any] = {}
    for key, value in (("scope", scope), ("condition", condition), ("negate", negate),
                       ("text", text), ("enabled", enabled)):
        if value is not None:
            patch[key] = value
    if when is not None:
        patch["when"] = _when(when)
    if repeat is not None:
        patch["repeat"] = _repeat(repeat)
    if not patch:
        err.print("[red]error:[/red] nothing to change; give at least one option")
        raise typer.Exit(2)
    _print_rule(in_session(lambda s: service.edit_rule(s, name, patch)), "saved")


@app.command("rm")
def rm_cmd(name: Annotated[str, typer.Argument(help="The rule to delete.")]) -> None:
    """Delete a stream rule (its firing records stay in the stats)."""
    from evacore.services import rules as service

    in_session(lambda s: service.delete_rule(s, name))
    console.print(f"[green]deleted[/green] [bold]{name}[/bold]")


@app.command("test")
def test_cmd(
    name: Annotated[str | None, typer.Argument(help="The rule to try (with --corpus: only "
                                               "this rule's samples, `rule` may be left "
                                               "out).")] = None,
    text: Annotated[str | None, typer.Option(help="A sample answer (text rules).")] = None,
    arguments: Annotated[str, typer.Option(help="The call's arguments as JSON (tool "
                                           "rules).")] = "{}",
    tool: Annotated[str | None, typer.Option(help="The called tool; default: the rule's "
                                             "own.")] = None,
    env: Annotated[list[str] | None, typer.Option(help="A flag that holds (repeatable); "
                                                  "default: `when` is assumed to hold.")] = None,
    corpus: Annotated[Path | None, typer.Option(
        help="A JSON Lines file of samples ({\"rule\", \"expect\": \"catch\"|\"pass\", "
             "\"text\"} per line): print each rule's catch rate and false-positive rate.",
        dir_okay=False)] = None,
    show: Annotated[int, typer.Option(help="With --corpus: how many misses and false "
                                      "positives to list per rule.")] = 10,
) -> None:
    """Would the rule fire on this sample? Fires nothing, ignores repeat policies. With
    --corpus, measure the stored rules on a corpus file instead."""
    from evacore.services import rules as service

    if corpus is not None:
        _corpus_report(corpus, name, show)
        return
    if name is None:
        err.print("[red]error:[/red] name the rule to try, or give --corpus FILE")
        raise typer.Exit(2)
    flags = _when(env)
    rule, result = in_session(lambda s: service.probe(
        s, name=name, text=text, tool=tool, arguments=arguments, env=flags))
    verdict = "[bold green]fires[/bold green]" if result.fires else "[bold]does not fire[/bold]"
    console.print(f"[bold]{rule.name}[/bold] {verdict}: {result.reason}", highlight=False)
    if result.target:
        console.print(Text("target: ", style="dim") + Text(result.target))


def _corpus_report(path: Path, name: str | None, show: int) -> None:
    """Measure the stored rules on a corpus file; a bad file exits 2 and says which lines."""
    from evacore.rules import measure, parse_corpus
    from evacore.rules.corpus import percent
    from evacore.services import rules as service

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err.print(f"[red]error:[/red] cannot read {path}: {exc}", highlight=False)
        raise typer.Exit(2) from exc
    samples: list[Any] = []
    _check(lambda: samples.extend(parse_corpus(text, rule=name, source=str(path))))
    rules = in_session(service.list_rules)
    scores = measure(rules, samples)
    disabled = {rule.name for rule in rules if not rule.enabled}
    table = Table("rule", "caught", "catch rate", "false positives", "false-positive rate")
    for score in scores:
        if score.problem:
            table.add_row(score.rule, "—", score.problem, "—", "—")
            continue
        label = score.rule + (" (disabled)" if score.rule in disabled else "")
        table.add_row(label, f"{score.caught}/{score.catch_total}", percent(score.catch_rate),
                      f"{score.false_positives}/{score.pass_total}",
                      percent(score.false_positive_rate))
    console.print(table)
    for score in scores:
        for kind, items in (("missed", score.misses), ("false positive", score.false_alarms)):
            for sample in items[:show]:
                console.print(Text(f"{score.rule} {kind} (line {sample.line}): ", style="dim")
                              + Text(_short(json.dumps(sample.shown, ensure_ascii=False), 160)))
    if any(score.problem for score in scores):
        raise typer.Exit(2)
