"""R11 / R8.1 from the command line: `evacore db upgrade` migrates an empty database; the first
start without EVACORE_MASTER_TOKEN prints a master token once (never again, never in the log);
`evacore token create --role` prints a working token on stdout alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers import ServerProcess


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evacore", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")}
    return {**env, "EVACORE_DATA_DIR": str(tmp_path / "data"), "EVACORE_LOG_FORMAT": "json"}


def test_r11_db_upgrade_migrates_an_empty_database(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = _cli("db", "upgrade", env=env)
    assert done.returncode == 0, done.stderr
    assert "database at revision" in done.stdout
    assert (tmp_path / "data" / "evacore.db").is_file()
    again = _cli("db", "upgrade", env=env)
    assert again.returncode == 0 and again.stdout == done.stdout


def test_r8_1_the_first_start_prints_the_master_token_once(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = _cli("token", "create", "--role", "trusted", "--name", "tom", env=env)
    assert first.returncode == 0, first.stderr
    guest_token = first.stdout.strip()
    assert guest_token.startswith("evc_") and "\n" not in guest_token
    assert "created the master token" in first.stderr
    master = first.stderr.split("store it now):", 1)[1].split()[0]
    assert master.startswith("evc_") and master != guest_token
    for line in first.stderr.splitlines():  # the JSON log lines never carry it
        if line.startswith("{"):
            assert master not in line

    second = _cli("token", "create", "--role", "guest", env=env)
    assert second.returncode == 0 and "created the master token" not in second.stderr

    server = ServerProcess(tmp_path / "data", f"sqlite+aiosqlite:///{tmp_path / 'data' / 'evacore.db'}",
                           master, EVACORE_MASTER_TOKEN="").start()
    try:
        me = httpx.get(f"{server.url}/v1/me", headers={"Authorization": f"Bearer {master}"})
        assert me.json()["role"] == "master"
        tom = httpx.get(f"{server.url}/v1/me", headers={"Authorization": f"Bearer {guest_token}"})
        assert tom.json() | {"id": None, "created_at": None} == {
            "id": None, "name": "tom", "role": "trusted", "created_at": None}
    finally:
        server.kill()
    assert "created the master token" not in server.log.read_text()


def test_r11_token_create_refuses_an_unknown_role(tmp_path: Path) -> None:
    done = _cli("token", "create", "--role", "emperor", env=_env(tmp_path))
    assert done.returncode == 2 and "role must be one of" in done.stderr
    assert done.stdout == ""
