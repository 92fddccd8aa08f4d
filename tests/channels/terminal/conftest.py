"""Fixtures for the terminal channel: one real `evacore serve` (per test process) on loopback
with SQLite, a master API client for it, `run_cli` to run `evacore chat` / `evacore client` as
a subprocess of this worktree's package, and `invoke` to run them in this process.

Must not: reach outside 127.0.0.1, or let a CLI run read the machine's own data dir.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import MASTER_TOKEN
from tests.fakes.fixtures import openai_fake  # noqa: F401
from tests.helpers import ServerProcess

ROOT = Path(__file__).resolve().parents[3]
CLI_TIMEOUT = 60


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("srv") / "data"
    srv = ServerProcess(data, f"sqlite+aiosqlite:///{data.parent / 'evacore.db'}",
                        MASTER_TOKEN).start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as c:
        yield c


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")}
    env.update(PYTHONPATH=str(ROOT), EVACORE_DATA_DIR=str(data_dir), COLUMNS="120",
               EVACORE_LOG_FORMAT="json", **extra)
    return env


@pytest.fixture
def run_cli(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_cli("client", "--url", …, input="n\\n")`: one run of the CLI in a subprocess, with
    its own data dir (for the history file, or the embedded database)."""

    def run(*args: str, input: str = "", env: dict[str, str] | None = None,
            timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evacore", *args], check=False, input=input, capture_output=True,
            text=True, cwd=ROOT, timeout=timeout,
            env=env or cli_env(tmp_path / "cli-data"))

    return run


@pytest.fixture
def invoke(tmp_path: Path) -> Callable[..., Any]:
    """`invoke("chat", …, input=…)`: the same CLI in this process (Typer's CliRunner), for the
    cases that need no terminal of their own; `.exit_code`, `.stdout`, `.stderr`."""
    from typer.testing import CliRunner

    from evacore.cli import app

    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EVACORE_")}
    env.update(EVACORE_DATA_DIR=str(tmp_path / "cli-data"), EVACORE_LOG_FORMAT="json",
               COLUMNS="120")

    def run(*args: str, input: str = "") -> Any:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            return CliRunner(env=env).invoke(app, list(args), input=input)
        finally:  # the CLI configured logging onto the runner's streams: put it back
            root.handlers[:] = handlers
            root.setLevel(level)

    return run


def scripted_chat(api: httpx.Client, script: list[dict[str, Any]], **chat: Any) -> str:
    """A chat on a mock connection answering from `script` (rules of evacore/providers/mock.py)."""
    r = api.post("/v1/connections", json={"name": "scripted", "kind": "mock",
                                          "params": {"script": script}})
    assert r.status_code == 201, r.text
    r = api.post("/v1/chats", json={"connection_id": r.json()["id"], **chat})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def tour_id_of(stderr: str) -> str:
    """The tour id from the CLI's `tour <id> <status> · …` line on stderr."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("tour "):
            return line.split()[1]
    raise AssertionError(f"no tour line in:\n{stderr}")


def results_of(api: httpx.Client, chat_id: str) -> dict[str, str]:
    """Tool call id -> stored result content, over the newest answer's steps."""
    messages = api.get(f"/v1/chats/{chat_id}/messages").json()["messages"]
    message = [m for m in messages if m["role"] == "assistant"][-1]
    variant = next(v for v in message["variants"] if v["id"] == message["active_variant"])
    return {r["id"]: r["content"] for s in variant["steps"] for r in s["results"]}
