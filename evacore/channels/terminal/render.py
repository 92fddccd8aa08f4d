"""Rich output of the terminal chat: a tour's events as they stream, and `/inspect`'s readable
view of a tour's diagnostics (stages and timings, change log, context-shift cuts, lorebook
entries, rule firings, the requests sent).

Must not: call the API or read input; it only turns events and JSON into terminal output.
The answer's text goes to `out` (stdout: what a script captures); everything else to `err`.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from evacore.channels.terminal.api import Event

SHORT = 160


def short(text: Any, limit: int = SHORT) -> str:
    """One line of at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles; the answer's text is printed as is, never as markup."""
    return (Console(highlight=False, emoji=False, soft_wrap=True),
            Console(stderr=True, highlight=False, emoji=False, soft_wrap=True))


class EventPrinter:
    """Prints one tour's events; `speaker` prefixes the answer in a terminal."""

    def __init__(self, out: Console, err: Console, *, speaker: str | None = None) -> None:
        self.out, self.err, self.speaker = out, err, speaker
        self._open = False  # the answer's line is still being written
        self._held = False

    def _end_line(self) -> None:
        if self._open:
            self.out.print()
            self._open = False

    def note(self, text: str, style: str = "dim") -> None:
        self._end_line()
        self.err.print(Text(text, style=style))

    def event(self, event: Event) -> None:
        name, data = event.name, event.data
        if name == "delta":
            if not self._open:
                if self.speaker:
                    self.out.print(Text(f"{self.speaker} › ", style="bold magenta"), end="")
                self._open = True
            self.out.print(data.get("text", ""), markup=False, end="")
            self.out.file.flush()
        elif name == "hold" and not self._held:
            self._held = True
            self.note("⏸ held until the stream rules have checked the answer")
        elif name == "tool_call":
            self.note(f"⚙ {data.get('name')} {short(data.get('arguments', ''))}", "blue")
        elif name == "tool_result":
            self.note(f"↳ {short(data.get('content', ''))}", "blue")
        elif name == "error":
            self.note(f"error: {data.get('message')} ({data.get('code')})", "bold red")
        elif name in ("message", "done"):
            self._end_line()

    def client_op(self, data: dict[str, Any], posted: str) -> None:
        self.note(f"⇄ {data.get('name')} on this machine: {posted}", "cyan")

    def finish(self) -> None:
        self._end_line()


def footer(tour_id: str | None, status: str, done: dict[str, Any] | None) -> Text:
    """`tour <id> completed · stop · 62+16 tokens · 84 ms`, for stderr."""
    parts = [f"tour {tour_id or '?'} {status}"]
    if done:
        if done.get("finish_reason"):
            parts.append(str(done["finish_reason"]))
        usage = done.get("usage") or {}
        if usage.get("prompt_tokens") is not None:
            parts.append(f"{usage.get('prompt_tokens')}+{usage.get('completion_tokens')} tokens")
        timings = done.get("timings") or {}
        if timings:
            parts.append(f"{sum(timings.values()):.0f} ms")
    return Text(" · ".join(parts), style="dim")


def _table(title: str, *columns: str) -> Table:
    return Table(*columns, title=title, title_justify="left", title_style="bold",
                 show_edge=False, pad_edge=False)


def _ids(items: list[Any]) -> str:
    return ", ".join(short(i, 40) for i in items) if items else ""


def _stages(d: dict[str, Any]) -> Table:
    table = _table("stages (ms)", "stage", "ms")
    for stage, ms in (d.get("timings") or {}).items():
        table.add_row(stage, f"{ms:.1f}")
    if d.get("first_token_ms") is not None:
        table.add_row(Text("first token", style="dim"), f"{d['first_token_ms']:.1f}")
    return table


def _changes(d: dict[str, Any]) -> Table:
    table = _table("change log (by stage and plugin)", "stage", "by", "added", "removed",
                   "changed")
    for c in d.get("changes") or []:
        table.add_row(str(c.get("stage")), str(c.get("actor")), _ids(c.get("added") or []),
                      _ids(c.get("removed") or []), _ids(c.get("changed") or []))
    return table


def _cuts(d: dict[str, Any]) -> RenderableType:
    shift = d.get("shift") or {}
    tokens = d.get("tokens") or {}
    removed = list(shift.get("removed") or []) + list(shift.get("removed_after_interceptors")
                                                      or [])
    head = Text(f"context shift: prompt {tokens.get('prompt', '?')} tokens, budget "
                f"{tokens.get('budget', '?')}, sent {tokens.get('fitted', '?')}"
                + ("" if removed else "; nothing was cut"))
    if not removed:
        return head
    table = _table("", "cut", "kind", "tokens", "why")
    for r in removed:
        if isinstance(r, dict):
            table.add_row(short(r.get("id"), 50), str(r.get("kind", "")),
                          str(r.get("tokens", "")), short(r.get("reason", ""), 60))
        else:
            table.add_row(short(r, 50), "", "", "")
    return Group(head, table)


def _lore(d: dict[str, Any]) -> RenderableType:
    lore = d.get("lore") or {}
    activated, cut = lore.get("activated") or [], lore.get("cut") or []
    if not activated and not cut:
        books = lore.get("books_loaded", len(lore.get("books") or []))
        return Text(f"lorebook: no entry fired ({books} book(s) scanned)")
    table = _table("lorebook entries", "book", "entry", "", "why", "tokens")
    for a in activated:
        table.add_row(str(a.get("book")), f"#{a.get('uid')} {short(a.get('comment') or '', 30)}",
                      Text("fired", style="green"), short("; ".join(a.get("reasons") or []), 70),
                      str(a.get("tokens", "")))
    for c in cut:
        table.add_row(str(c.get("book")), f"#{c.get('uid')} {short(c.get('comment') or '', 30)}",
                      Text("cut", style="yellow"),
                      short(f"{c.get('reason')}: {c.get('detail') or ''}", 70), "")
    return table


def _rules(d: dict[str, Any]) -> RenderableType:
    rules = d.get("rules") or {}
    fired, discarded = rules.get("fired") or [], d.get("discarded") or []
    head = Text(f"stream rules: {len(rules.get('loaded') or [])} loaded, armed for the text: "
                f"{', '.join(rules.get('armed') or []) or 'none'}"
                + ("" if fired or discarded else "; none fired"))
    if not fired and not discarded:
        return head
    table = _table("", "rule fired", "scope", "on", "turn")
    for f in fired:
        on = f.get("tool") or ("answer, retried" if f.get("retry") else "answer")
        table.add_row(str(f.get("rule")), str(f.get("scope")), str(on), str(f.get("turn", "")))
    for x in discarded:
        table.add_row(str(x.get("rule")), "", f"step {x.get('step')} discarded", "")
    return Group(head, table)


def _requests(d: dict[str, Any]) -> Text:
    requests = d.get("requests") or []
    lines = [f"requests sent: {len(requests)} (see `/inspect prompt` for the exact bodies)"]
    for r in requests:
        body = r.get("body") or {}
        size = (f"{len(body['messages'])} messages" if "messages" in body
                else f"a prompt of {len(str(body.get('prompt', '')))} characters")
        lines.append(f"  step {r.get('step')}: {r.get('method')} {r.get('url')} · {size} · "
                     f"{len(body.get('tools') or [])} tools")
    return Text("\n".join(lines))


def inspect_view(tour: dict[str, Any]) -> Group:
    """The readable diagnostics of a tour (GET /v1/tours/{id})."""
    d = tour.get("diagnostics") or {}
    env = [k for k, v in (tour.get("env") or {}).items() if v]
    head = Text.assemble(
        (f"tour {tour.get('tour_id')}", "bold"), f" · {tour.get('status')} · mode "
        f"{tour.get('mode')} · env {', '.join(env) or 'none'}")
    parts: list[RenderableType] = [head]
    if tour.get("error"):
        err = tour["error"]
        parts.append(Text(f"error: {err.get('message')} ({err.get('code')})", style="red"))
    parts += [_stages(d), _changes(d), _cuts(d), _lore(d), _rules(d)]
    offered = d.get("tools_offered") or []
    parts.append(Text(f"tools offered: {', '.join(offered) or 'none'}"))
    plugins = d.get("plugins") or []
    if plugins:
        table = _table("plugins", "stage", "hook", "outcome", "ms")
        for p in plugins:
            table.add_row(str(p.get("stage")), str(p.get("hook")), str(p.get("outcome")),
                          str(p.get("duration_ms", "")))
        parts.append(table)
    parts.append(_requests(d))
    return Group(*parts)


def prompt_view(tour: dict[str, Any]) -> Group:
    """The exact request bodies the tour sent upstream, one per step."""
    parts: list[RenderableType] = []
    for r in (tour.get("diagnostics") or {}).get("requests") or []:
        parts.append(Text(f"step {r.get('step')}: {r.get('method')} {r.get('url')}",
                          style="bold"))
        body = dict(r.get("body") or {})
        for m in body.pop("messages", None) or []:
            content = m.get("content")
            shown = content if isinstance(content, str) else json.dumps(content,
                                                                        ensure_ascii=False)
            parts.append(Text.assemble((f"[{m.get('role')}] ", "cyan"), shown or ""))
            if m.get("tool_calls"):
                parts.append(Text(json.dumps(m["tool_calls"], ensure_ascii=False), style="dim"))
        if "prompt" in body:
            parts.append(Text(str(body.pop("prompt"))))
        tools = body.pop("tools", None)
        if tools:
            names = [t.get("function", {}).get("name") for t in tools]
            parts.append(Text(f"tools: {', '.join(map(str, names))}", style="dim"))
        parts.append(Text(json.dumps(body, ensure_ascii=False), style="dim"))
    return Group(*parts) if parts else Group(Text("no request was sent"))
