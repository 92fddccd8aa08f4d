"""R14.3: embedded mode in process: the local data dir's core and HTTP app served on a private
Unix socket; the SSE stream arrives while the tour runs (httpx's ASGITransport would buffer
it whole, and a client op could then never be answered)."""

from __future__ import annotations

import io
import stat
import time
from pathlib import Path

from rich.console import Console

from evacore.channels.terminal.chat import ChatSession
from evacore.channels.terminal.ops import OpRunner
from evacore.channels.terminal.reader import PipeReader
from evacore.cli._embedded import embedded_api
from evacore.config import Settings
from evacore.core import start_core
from evacore.store.users import list_tokens, list_users


def local(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", log_format="json", log_level="WARNING")


async def test_r14_3_embedded_stream_arrives_while_the_tour_runs(tmp_path: Path) -> None:
    tokens: list[str] = []
    async with embedded_api(local(tmp_path), on_bootstrap=tokens.append) as api:
        assert api.socket is not None
        sock = Path(api.socket)
        assert stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700  # nobody else can connect
        conn = await api.call("POST", "/v1/connections", json={
            "name": "slow", "kind": "mock",
            "params": {"script": [{"text": "one two three four five six", "token_delay": 0.15}]}})
        chat = await api.create_chat(connection_id=conn["id"])
        arrived: list[tuple[str, float]] = []
        async for event in api.generate(chat["id"], {"message": {"content": "go"}}):
            arrived.append((event.name, time.monotonic()))
    deltas = [at for name, at in arrived if name == "delta"]
    assert len(deltas) == 6
    assert deltas[-1] - deltas[0] >= 0.6  # one by one, 0.15 s apart, not one buffered lump
    assert [name for name, _ in arrived][-2:] == ["message", "done"]
    assert len(tokens) == 1 and tokens[0].startswith("evc_")  # first start: shown once
    assert not sock.parent.exists()  # removed on exit
    assert (tmp_path / "data" / "evacore.db").is_file()
    core = await start_core(local(tmp_path))  # the run's own token was revoked on exit
    try:
        async with core.session() as s:
            masters = [u for u in await list_users(s) if u.role == "master"]
            assert [len(await list_tokens(s, u.id)) for u in masters] == [1]
    finally:
        await core.aclose()


async def test_r14_3_embedded_client_op_round_trip_and_stored_history(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "plan.txt").write_text("step one: tea\n")
    out, err = io.StringIO(), io.StringIO()
    settings = local(tmp_path)
    async with embedded_api(settings) as api:
        conn = await api.call("POST", "/v1/connections", json={
            "name": "scripted", "kind": "mock", "params": {"script": [
                {"step": 0, "tool_calls": [{"name": "client_read_file",
                                            "arguments": {"path": "plan.txt"}}]},
                {"step": 1, "if_prompt_contains": "step one: tea", "text": "First, tea."},
                {"step": 1, "text": "I could not read it."}]}})
        session = ChatSession(api, PipeReader(Console(file=err)), Console(file=out),
                              Console(file=err), ops=OpRunner(root))
        await session.open(None, None, conn["id"])
        outcome = await session.generate("normal", "what is the plan?")
        assert outcome.completed, err.getvalue()
        assert outcome.content == "First, tea."
        tour = await api.tour(outcome.tour_id or "")
        chat_id = session.chat["id"]
    assert "First, tea." in out.getvalue()
    assert "read_file on this machine: step one: tea" in err.getvalue()
    assert tour["env"]["client_ops"] is True
    async with embedded_api(settings) as api:  # a second start finds the stored chat
        messages = await api.messages(chat_id)
    assert [m["content"] for m in messages] == ["what is the plan?", "First, tea."]
