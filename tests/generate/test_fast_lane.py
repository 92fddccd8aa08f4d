"""The fast lane end to end (R2.12, R12.4): a paced answer's deltas go to the client from the
upstream read itself, in order, and are stored whole; a client that stops reading for a
while and goes on still gets every byte, in order, on a real `evacore serve`."""

from __future__ import annotations

import asyncio
import socket

import httpx
import orjson

from evacore.config import Settings
from evacore.core import start_core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN, wipe
from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import deltas, fake_connection, messages, new_chat, stream, tour_of
from tests.helpers import ServerProcess, parse_sse

WORDS = " ".join(f"word{i}" for i in range(60))


async def test_r2_12_paced_deltas_take_the_fast_lane_and_are_stored_whole(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    openai_fake.script.add(Reply(text=WORDS, token_delay=0.005))
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    events = await stream(client, chat, "Count.")
    assert "".join(deltas(events)) == WORDS
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    diagnostics = (await tour_of(client, tour_id))["diagnostics"]
    assert diagnostics["fast_lane_deltas"] >= 30  # most of the 60 skipped the tour's task
    assert diagnostics["first_token_ms"] > 0
    assert (await messages(client, chat))[-1]["content"] == WORDS


async def test_r2_12_a_first_token_that_comes_alone_takes_the_fast_lane_too(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    # the upstream's head comes at once, its first token a while later, as a model's does
    openai_fake.script.add(Reply(text="Seven gulls sat on the wall.", model="served-7",
                                 first_token_delay=0.15, token_delay=0.05))
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    events = await stream(client, chat, "Count.")
    assert "".join(deltas(events)) == "Seven gulls sat on the wall."
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    diagnostics = (await tour_of(client, tour_id))["diagnostics"]
    assert diagnostics["fast_lane_deltas"] == 6  # every word, the first one included
    assert diagnostics["first_token_ms"] >= 150
    answer = (await messages(client, chat))[-1]
    assert answer["content"] == "Seven gulls sat on the wall."
    active = next(v for v in answer["variants"] if v["id"] == answer["active_variant"])
    assert active["model"] == "served-7" and active["status"] == "complete"


async def test_r2_11_a_stream_cut_after_a_first_token_the_lane_took_is_not_retried(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    openai_fake.script.add(Reply(text="Seven gulls sat.", first_token_delay=0.1,
                                 reset_after=1))
    openai_fake.script.reply("never asked for")
    chat = await new_chat(client, await fake_connection(
        client, openai_fake, params={"retries": 2}))
    events = await stream(client, chat, "Count.")
    assert "".join(deltas(events)) == "Seven "  # once: the client had it, nothing replayed
    assert events[-1][0] == "error"
    assert len(openai_fake.generation_requests) == 1
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    assert (await tour_of(client, tour_id))["diagnostics"]["fast_lane_deltas"] == 1


async def test_r2_12_stop_strings_keep_deltas_off_the_fast_lane(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    openai_fake.script.add(Reply(text=WORDS, token_delay=0.005))
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    events = await stream(client, chat, "Count.", params={"stop": ["word30"]})
    text = "".join(deltas(events))
    assert text.rstrip() == " ".join(f"word{i}" for i in range(30))
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    assert "fast_lane_deltas" not in (await tour_of(client, tour_id))["diagnostics"]


async def test_r6_7_an_answer_held_for_a_text_rule_never_takes_the_fast_lane(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    r = await client.post("/v1/rules", json={
        "name": "no_forbidden", "scope": "text", "condition": "FORBIDDEN",
        "text": "Never say that word."})
    assert r.status_code == 201, r.text
    openai_fake.script.add(Reply(text=WORDS + " FORBIDDEN", token_delay=0.005))
    openai_fake.script.add(Reply(text=WORDS, token_delay=0.005))
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    events = await stream(client, chat, "Count.")
    # the held draft never reached the client, not one delta of it; the retry, no longer
    # held (the rule fired), streams as usual
    assert "".join(deltas(events)) == WORDS
    assert [n for n, _ in events].count("hold") == 1
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    diagnostics = (await tour_of(client, tour_id))["diagnostics"]
    assert len(diagnostics["discarded"]) == 1


WATCHER = """
from evacore.plugins import Plugin
plugin = Plugin(name="watcher", version="1")
seen = []

@plugin.stream(capabilities=["response:write"])
async def shout(ctx):
    seen.append(ctx.delta)
    ctx.delta = ctx.delta.upper()
"""


async def test_r3_stream_hooks_see_and_change_every_delta_of_a_paced_answer(
    settings: Settings, openai_fake: FakeUpstream
) -> None:
    settings.plugins_dir.mkdir(parents=True, exist_ok=True)
    (settings.plugins_dir / "watcher.py").write_text(WATCHER)
    await wipe(settings.db_url)
    core = await start_core(settings)
    try:
        async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(core=core)),
                base_url="http://evacore.test",
                headers={"Authorization": f"Bearer {MASTER_TOKEN}"}, timeout=30) as api:
            r = await api.patch("/v1/plugins/watcher", json={"permissions": ["response:write"]})
            assert r.status_code == 200, r.text
            openai_fake.script.add(Reply(text=WORDS, token_delay=0.005))
            chat = await new_chat(api, await fake_connection(api, openai_fake))
            events = await stream(api, chat, "Count.")
            assert "".join(deltas(events)) == WORDS.upper()  # not one delta went around it
            tour_id = next(d["tour_id"] for n, d in events if n == "tour")
            assert "fast_lane_deltas" not in (await tour_of(api, tour_id))["diagnostics"]
    finally:
        await core.aclose()


# -- a real server, a client that stops reading for a while -----------------------------------

def _dechunk(body: bytes) -> bytes:
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return b"".join(out)


def _read_all(sock: socket.socket) -> bytes:
    parts = []
    while data := sock.recv(1 << 16):
        parts.append(data)
    return b"".join(parts)


async def test_r12_4_a_reader_that_pauses_gets_every_paced_byte_in_order(
    server: ServerProcess, openai_fake: FakeUpstream
) -> None:
    # 4 MB in 16 KB deltas 2 ms apart: far more than the sockets' buffers hold while the
    # client sleeps, so writes from the upstream's read have to wait for it, in order.
    pieces = [f"<{i:05d}>" + "y" * (16 * 1024 - 7) for i in range(256)]
    openai_fake.script.add(Reply(text="".join(pieces), chunks=pieces, token_delay=0.002))
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(),
                                 timeout=30) as api:
        chat = await new_chat(api, await fake_connection(api, openai_fake))
        body = orjson.dumps({"message": {"content": "Everything."}, "stream": True})
        head = (f"POST /v1/chats/{chat}/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {MASTER_TOKEN}\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        try:
            sock.sendall(head.encode() + body)
            await asyncio.sleep(1.5)  # not reading: the server's writes have to wait
            raw = await asyncio.to_thread(_read_all, sock)
        finally:
            sock.close()
        header, _, chunked = raw.partition(b"\r\n\r\n")
        assert header.startswith(b"HTTP/1.1 200"), header
        events = parse_sse(_dechunk(chunked).decode())
        assert "".join(deltas(events)) == "".join(pieces)
        assert [n for n, _ in events][-1] == "done"
        tour_id = next(d["tour_id"] for n, d in events if n == "tour")
        tour = (await api.get(f"/v1/tours/{tour_id}")).json()
        assert tour["status"] == "completed"
        assert tour["diagnostics"].get("fast_lane_deltas", 0) > 0
        assert (await messages(api, chat))[-1]["content"] == "".join(pieces)


PIECES = ['He said "hi"', "\n", "tab\there", " üñí", " 🙂", " back\\slash", " </script>", " end."]


async def test_r2_12_paced_texts_reach_both_routes_exactly_from_the_network_read(
    server: ServerProcess, openai_fake: FakeUpstream
) -> None:
    """On a real `evacore serve`, a paced answer whose texts need escaping comes out of the
    generate route and the OpenAI-compatible facade text for text, written from the
    upstream's read (the tours' `fast_lane_deltas`), and is stored whole."""
    text = "".join(PIECES)
    for _ in range(2):
        openai_fake.script.add(Reply(text=text, chunks=PIECES, token_delay=0.01))
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(),
                                 timeout=30) as api:
        connection = await fake_connection(api, openai_fake, name="lane")
        chat = await new_chat(api, connection)
        events = await stream(api, chat, "Say it.")
        assert deltas(events) == PIECES
        tour_id = next(d["tour_id"] for n, d in events if n == "tour")
        assert (await tour_of(api, tour_id))["diagnostics"]["fast_lane_deltas"] >= 4
        assert (await messages(api, chat))[-1]["content"] == text

        r = await api.post("/v1/chat/completions", json={
            "model": "@lane", "stream": True,
            "messages": [{"role": "user", "content": "Say it."}]})
        assert r.status_code == 200, r.text
        lines = [line[6:] for line in r.text.split("\n\n") if line.startswith("data: ")]
        assert lines[-1] == "[DONE]"
        contents = [choice["delta"].get("content") for line in lines[:-1]
                    for choice in orjson.loads(line)["choices"]]
        assert "".join(c for c in contents if c) == text
        assert [c for c in contents if c] == PIECES
        tour = await tour_of(api, r.headers["X-Evacore-Tour"])
        assert tour["diagnostics"]["fast_lane_deltas"] >= 4
