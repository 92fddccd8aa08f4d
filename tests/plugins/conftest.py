"""Helpers for plugin tests: real plugin files written to a tmp plugins folder and discovered."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from evacore.plugins import CtxBase, PluginManager, discover
from evacore.prompt.changelog import ChangeLog

Loader = Callable[..., PluginManager]


def write_plugins(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        (folder / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return folder


@pytest.fixture
def load_plugins(tmp_path: Path) -> Loader:
    """Write `{file name: source}` into a plugins folder, discover it, grant what is asked."""

    def load(files: dict[str, str], *, grant: dict[str, Iterable[str]] | None = None,
             grant_declared: bool = True, **kw: Any) -> PluginManager:
        folder = write_plugins(tmp_path / "plugins", files)
        manager = PluginManager(discover(folder, entry_points=False, builtins=False), **kw)
        for item in manager.list():
            if item["state"] == "broken":
                continue
            perms = (grant or {}).get(item["name"])
            if perms is None and grant_declared:
                perms = item["capabilities"]
            if perms is not None:
                manager.update(item["name"], permissions=list(perms))
        return manager

    return load


def tour(**kw: Any) -> CtxBase:
    kw.setdefault("tour_id", "tour-1")
    kw.setdefault("chat_id", "chat-1")
    kw.setdefault("abort", asyncio.Event())
    kw.setdefault("changelog", ChangeLog())
    return CtxBase(**kw)


def element(id: str, role: str = "user", content: str = "", *, protected: bool = False,
            kind: str = "history", source: str | None = None, tokens: int | None = 5) -> dict[str, Any]:
    return {"id": id, "role": role, "content": content, "protected": protected,
            "source": source or (f"history:{id}" if kind in ("history", "input") else kind),
            "kind": kind, "tokens": tokens, "name": None, "tool_calls": None, "tool_call_id": None}


def prompt(n: int = 6) -> list[dict[str, Any]]:
    """A small prompt: a protected system prompt, history, and the protected current input."""
    out = [element("sys", "system", "You are Eva.", protected=True, kind="system", source="system")]
    for i in range(1, n - 1):
        out.append(element(f"h{i}", "user" if i % 2 else "assistant", f"message {i}"))
    out.append(element("input", "user", "hello", protected=True, kind="input"))
    return out
