"""R6.9, R11: `evacore rules list|add|edit|rm|test` and `evacore stats` apply the shared
validation (bad input exits 2 with a message), and `evacore demo` runs offline on a fresh data
dir and shows a soft and a hard rule firing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evacore.cli import app
from tests.rules_integration.helpers import SEEDED


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {"EVACORE_DATA_DIR": str(tmp_path / "data"),
           "EVACORE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
           "EVACORE_MASTER_TOKEN": "evc_cli_master_token_0123456789",
           "EVACORE_LOG_LEVEL": "WARNING", "COLUMNS": "200"}
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args), env=env)
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exit_code == code, (args, output, result.exception)
        return output

    return run


def test_r11_rules_commands_share_validation_and_exit_2_on_bad_input(cli) -> None:  # type: ignore[no-untyped-def]
    bad = cli("rules", "add", "--name", "Bad", "--scope", "tool:", "--text", "x", code=2)
    assert "invalid rule" in bad and "name:" in bad and "scope:" in bad
    added = cli("rules", "add", "--name", "no_shouting", "--scope", "text", "--condition",
                "[A-Z]{12}", "--text", "Do not shout.", "--when", "telegram,trusted",
                "--repeat", "after:2")
    assert "created" in added and "no_shouting" in added
    assert "already exists" in cli("rules", "add", "--name", "no_shouting", "--scope", "text",
                                   "--text", "x", code=2)
    assert "repeat" in cli("rules", "edit", "no_shouting", "--repeat", "after:0", code=2)
    assert "nothing to change" in cli("rules", "edit", "no_shouting", code=2)
    cli("rules", "edit", "no_shouting", "--text", "Please do not shout.", "--disabled",
        "--when", "")
    rules = {r["name"]: r for r in json.loads(cli("rules", "list", "--json"))["rules"]}
    assert set(rules) == {*SEEDED, "no_shouting"}
    rule = rules["no_shouting"]
    assert (rule["text"], rule["enabled"], rule["when"], rule["repeat"]) == (
        "Please do not shout.", False, [], "after:2")
    fires = cli("rules", "test", "telegram_reply_tail", "--text", "See you.", "--env", "telegram")
    assert "fires" in fires and "does not fire" not in fires
    target = cli("rules", "test", "write_diff_over_write_file", "--arguments",
                 '{ "path" : "a.txt" }')
    assert '{"path":"a.txt"}' in target
    cli("rules", "rm", "no_shouting")
    table = cli("stats")
    assert all(name in table for name in SEEDED) and "no_shouting" not in table


def test_r11_demo_runs_offline_on_a_fresh_data_dir(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")}
    dead = "http://127.0.0.1:9"  # any attempt to reach the network fails
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "xdg"), COLUMNS="250",
               HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead, NO_PROXY="")
    done = subprocess.run(
        [sys.executable, "-m", "evacore", "demo", "--token-delay", "0"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert '<system-reminder rule="write_diff_over_write_file">write_file replaces' in out
    assert "wrote 45 bytes to notes.md (replaced)  (the clean result" in out
    assert '<system-interrupt reason="rule_violation" rule="telegram_reply_tail">' in out
    assert "Bring the big blanket! ↩ #1042" in out
    assert "hold:" in out and "discarded" in out
    stats = {line.split("│")[1].strip(): line.split("│")[2].strip()
             for line in out.splitlines() if line.count("│") >= 4}
    assert stats["telegram_reply_tail"] == "1" and stats["write_diff_over_write_file"] == "1"
    assert not (tmp_path / "xdg" / "evacore").exists()  # nothing written outside its temp dir


def test_r6_10_rules_test_corpus_reports_catch_and_false_positive_rates(
    cli, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    corpus = tmp_path / "mine.jsonl"
    lines = [
        "// an owner's own samples",
        '{"rule": "look_before_refusing", "expect": "catch", "text": "Я не умею смотреть картинки."}',
        '{"rule": "look_before_refusing", "expect": "catch", "text": "Pictures? Not my thing."}',
        '{"rule": "look_before_refusing", "expect": "pass", "text": "На фото я не вижу людей."}',
        "",
        '{"rule": "telegram_reply_tail", "expect": "pass", "text": "See you. ↩ #1"}',
        '{"rule": "telegram_reply_tail", "expect": "pass", "text": "Bye\\u2028now"}',
    ]
    corpus.write_text("\n".join(lines), encoding="utf-8")
    out = cli("rules", "test", "--corpus", str(corpus))
    assert "look_before_refusing" in out and "1/2" in out and "50.0 %" in out
    assert 'look_before_refusing missed (line 3): "Pictures? Not my thing."' in out
    assert "telegram_reply_tail false positive (line 7)" in out and "0/0" in out

    cli("rules", "edit", "telegram_reply_tail", "--disabled")
    one = cli("rules", "test", "telegram_reply_tail", "--corpus", str(corpus), code=2)
    assert "line 2: the sample is for 'look_before_refusing'" in one

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rule": "x", "expect": "maybe", "text": "t"}\nnot json\n', encoding="utf-8")
    message = cli("rules", "test", "--corpus", str(bad), code=2)
    assert "line 1:" in message and '"expect" must be' in message and "line 2:" in message
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"rule": "no_such_rule", "expect": "catch", "text": "t"}\n',
                       encoding="utf-8")
    assert "no such rule" in cli("rules", "test", "--corpus", str(unknown), code=2)
    assert "--corpus" in cli("rules", "test", code=2)
