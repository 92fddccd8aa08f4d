"""R14.2 end to end: `evacore serve` with a bot token set runs the channel (a message in
Telegram gets an answer from the built-in mock connection), and on SIGINT the process stops
cleanly: it exits 0, stops polling and lets the polling lease go."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from evacore.store.db import Database, create_engine
from evacore.store.tables import TelegramLease
from tests.conftest import MASTER_TOKEN
from tests.fakes.telegram import TOKEN, FakeBotApi
from tests.telegram.conftest import MASTER, MASTER_ID
from tests.telegram.helpers import answers_after


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_r14_2_evacore_serve_runs_the_bot_and_stops_cleanly(
    tmp_path: Path, bot_api: FakeBotApi
) -> None:
    data = tmp_path / "data"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")},
           "EVACORE_DATA_DIR": str(data), "EVACORE_MASTER_TOKEN": MASTER_TOKEN,
           "EVACORE_LOG_FORMAT": "json", "EVACORE_PORT": str(_free_port()),
           "EVACORE_TELEGRAM__TOKEN": TOKEN, "EVACORE_TELEGRAM__API_URL": bot_api.url,
           "EVACORE_TELEGRAM__MASTER_IDS": str(MASTER_ID)}
    proc = subprocess.Popen([sys.executable, "-m", "evacore", "serve"], env=env,  # noqa: ASYNC220
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        await bot_api.wait_for(lambda: bot_api.of("getUpdates") or proc.poll() is not None,
                               timeout=60)
        assert proc.poll() is None, proc.communicate()[0]
        bot_api.say(MASTER_ID, MASTER, "Hello from Telegram")
        sent = await answers_after(bot_api, MASTER_ID, timeout=30)
        assert sent[-1]["text"].strip()  # the mock connection answered through the pipeline
        proc.send_signal(signal.SIGINT)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "telegram.polling" in out and TOKEN not in out  # the token never reaches the log
    polls = len(bot_api.polls)
    await asyncio.sleep(1.0)
    assert len(bot_api.polls) == polls and all(p.ended is not None for p in bot_api.polls)
    db = Database(create_engine(f"sqlite+aiosqlite:///{data / 'evacore.db'}"))
    try:
        async with db.session() as s:
            lease = (await s.scalars(select(TelegramLease))).one()
    finally:
        await db.engine.dispose()
    assert lease.holder is None
