"""R11: `evacore import PATH...` imports folders of mixed files (kinds told by content), reports
what was imported, skipped and why, and `evacore export` writes everything back out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from evacore.cli import app
from evacore.config import Settings
from evacore.core import start_core
from evacore.formats.cards import read_card
from evacore.importing.detect import detect_kind
from evacore.store.tables import Character, Chat, Lorebook, Preset
from tests.conftest import MASTER_TOKEN
from tests.importing._util import CARDS, CHATS, FIXTURES, PRESETS


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A fresh SQLite data folder (the service under the CLI runs on both backends in the
    HTTP tests)."""
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("EVACORE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EVACORE_DATABASE_URL", db_url)
    monkeypatch.setenv("EVACORE_MASTER_TOKEN", MASTER_TOKEN)
    monkeypatch.setenv("COLUMNS", "200")
    return Settings(data_dir=tmp_path / "data", database_url=db_url, master_token=MASTER_TOKEN)


def _counts(settings: Settings) -> dict[str, int]:
    async def run() -> dict[str, int]:
        core = await start_core(settings)
        try:
            async with core.session() as s:
                return {t.__tablename__: int(await s.scalar(
                    select(func.count()).select_from(t)) or 0)
                    for t in (Character, Chat, Preset, Lorebook)}
        finally:
            await core.aclose()
    return asyncio.run(run())


def _extras(folder: Path) -> Path:
    folder.mkdir()
    (folder / "notes.txt").write_text("not an import\n")
    (folder / "bad.png").write_bytes(CARDS[0].read_bytes()[:4000])
    (folder / "broken.json").write_bytes(b'{"name": "half')
    return folder


def test_r11_import_a_folder_reports_imported_skipped_and_failed(
        env: Settings, tmp_path: Path) -> None:
    extras = _extras(tmp_path / "extras")
    result = CliRunner().invoke(app, ["import", str(FIXTURES), str(extras)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Import summary" in out
    imported = len(CARDS) + len(CHATS) + len(PRESETS) + 1
    assert f"imported {imported}, skipped 2, failed 2" in out
    assert "SOURCES.md" in out and "not a card, lorebook, preset or chat" in out
    assert "bad.png" in out and "truncated" in out
    assert "broken.json" in out and "not valid JSON" in out
    assert "(character 'Aqua')" in out
    counts = _counts(env)
    assert counts["characters"] == len(CARDS) and counts["chats"] == len(CHATS)
    assert counts["presets"] == len(PRESETS) - 1
    assert counts["lorebooks"] >= 3


def test_r11_export_writes_files_that_import_again(env: Settings, tmp_path: Path) -> None:
    runner = CliRunner()
    some_cards = [p for p in CARDS if "Amy" not in p.name and "Sakana" not in p.name]
    sources = [*some_cards, FIXTURES / "chats", FIXTURES / "presets", FIXTURES / "worldinfo"]
    assert runner.invoke(app, ["import", *map(str, sources)]).exit_code == 0
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", "characters", str(out / "cards"), "--format", "charx"])
    assert result.exit_code == 0, result.output
    cards = sorted((out / "cards").glob("*.charx"))
    assert len(cards) == len(some_cards)
    names = {read_card(p.read_bytes()).name for p in cards}
    assert names == {read_card(p.read_bytes()).name for p in some_cards}
    assert runner.invoke(app, ["export", "chats", str(out / "chats")]).exit_code == 0
    exported = {p.read_bytes() for p in (out / "chats").glob("*.jsonl")}
    assert exported == {p.read_bytes() for p in CHATS}
    assert runner.invoke(app, ["export", "presets", str(out / "presets")]).exit_code == 0
    assert {p.parent.name for p in (out / "presets").rglob("*.json")} == {
        "instruct", "context", "sysprompt"}
    assert runner.invoke(app, ["export", "lorebooks", str(out / "books")]).exit_code == 0
    books = list((out / "books").glob("*.json"))
    assert any(json.loads(p.read_bytes()).get("entries") for p in books)
    again = runner.invoke(app, ["import", str(out)])
    assert again.exit_code == 0, again.output
    assert "failed 0" in again.output


def test_r11_exit_codes(env: Settings, tmp_path: Path) -> None:
    runner = CliRunner()
    extras = _extras(tmp_path / "extras")
    assert runner.invoke(app, ["import", str(extras)]).exit_code == 1
    assert runner.invoke(app, ["import", str(tmp_path / "missing")]).exit_code == 2
    assert runner.invoke(app, ["import"]).exit_code == 2
    assert runner.invoke(app, ["export", "things", str(tmp_path / "o")]).exit_code == 2
    result = runner.invoke(app, ["export", "characters", str(tmp_path / "o"), "--format", "gif"])
    assert result.exit_code == 2


def test_r11_kinds_are_told_apart_by_content() -> None:
    assert {detect_kind(p.read_bytes()) for p in CARDS} == {"card"}
    assert {detect_kind(p.read_bytes()) for p in CHATS} == {"chat"}
    assert {detect_kind(p.read_bytes()) for p in PRESETS} == {"preset"}
    assert detect_kind((FIXTURES / "worldinfo" / "st_Eldoria.json").read_bytes()) == "lorebook"
    assert detect_kind(b'{"spec": "lorebook_v3", "data": {"entries": []}}') == "lorebook"
    assert detect_kind(b'{"name": "Old", "first_mes": "hi", "description": ""}') == "card"
    assert detect_kind(b'{"instruct": {"name": "a"}, "context": {"name": "b"}}') == "preset"
    assert detect_kind(b'{"mes": "hello", "is_user": true}') == "chat"
    assert detect_kind(b"PK\x03\x04rest") == "card"
    assert detect_kind(b"hello") is None and detect_kind(b'{"a": 1}') is None
