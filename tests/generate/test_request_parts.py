"""R8.5: a tour's record keeps the tool definitions and the long messages its provider request
repeats once for all tours (`store/request_parts.py`), and `GET /v1/tours/{id}` still shows the
exact request."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from evacore.core import Core
from evacore.redact import remember
from evacore.store import request_parts
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, new_chat, one, stream, tour_of


async def _stored_requests(core: Core, tour_id: str) -> list[dict[str, Any]]:
    async with core.session() as s:
        raw = (await s.execute(text("SELECT diagnostics FROM tours WHERE id = :id"),
                               {"id": tour_id})).scalar_one()
    diagnostics = raw if isinstance(raw, dict) else json.loads(raw)
    return diagnostics["requests"]


async def _shared(db: Any, diagnostics: dict[str, Any], chat_id: str | None = None
                  ) -> dict[str, Any]:
    """A record's parts named and stored in a transaction of their own, as a tour's save does
    in the record's."""
    out, pending = request_parts.named(db, diagnostics, chat_id)
    async with db.session() as s:
        await request_parts.store(s, pending)
    request_parts.committed(db, pending)
    return out


async def _parts(core: Core) -> list[str]:
    async with core.session() as s:
        return list((await s.scalars(text("SELECT digest FROM request_parts"))).all())


async def test_tours_share_one_copy_of_their_tool_definitions_and_show_the_exact_request(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    tour_ids = []
    for word in ("Hi.", "Again.", "Once more."):
        openai_fake.script.reply("Fine.")
        events = await stream(client, chat, word)
        tour_ids.append(one(events, "tour")["tour_id"])

    sent = openai_fake.generation_requests
    assert len(sent) == 3 and all(len(r.json["tools"]) >= 5 for r in sent)
    for tour_id, actual in zip(tour_ids, sent, strict=True):
        tour = await tour_of(client, tour_id)
        assert tour["diagnostics"]["requests"][0]["body"] == actual.json  # tools included
        stored = await _stored_requests(core, tour_id)
        assert stored[0]["body"]["tools"] == {request_parts.REF: stored[0]["body"]["tools"][
            request_parts.REF]}  # the record names the part instead of repeating it
        assert stored[0]["body"]["messages"] == actual.json["messages"]
    assert len(await _parts(core)) == 1  # three tours, one copy


async def test_long_messages_are_stored_once_and_each_record_shows_the_exact_request(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    """Every tour's request repeats the chat so far: each long message is kept once, the
    records name it, and a record's size no longer grows with the text of the chat."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    tour_ids = []
    for i in range(4):
        openai_fake.script.reply(f"Answer {i}: " + "the model goes on at length. " * 40)
        words = f"Question {i}: " + "I have a lot to say about this. " * 40
        tour_ids.append(one(await stream(client, chat, words), "tour")["tour_id"])
        tour_ids.append(one(await stream(client, chat, "Ok."), "tour")["tour_id"])

    sent = openai_fake.generation_requests
    assert len(sent) == 8
    sizes = []
    for tour_id, actual in zip(tour_ids, sent, strict=True):
        tour = await tour_of(client, tour_id)
        assert tour["diagnostics"]["requests"][0]["body"] == actual.json  # the exact request
        stored = await _stored_requests(core, tour_id)
        messages = stored[0]["body"]["messages"]
        for message, original in zip(messages, actual.json["messages"], strict=True):
            if len(json.dumps(original)) >= 2 * request_parts.MESSAGE_MIN_BYTES:
                assert list(message) == [request_parts.REF]  # named, not repeated
            elif original["content"] == "Ok.":
                assert message == original  # a short one stays in the record
        sizes.append(len(json.dumps(stored)))
    long_messages = {json.dumps(m, sort_keys=True) for r in sent for m in r.json["messages"]
                     if len(json.dumps(m)) >= 2 * request_parts.MESSAGE_MIN_BYTES}
    assert len(long_messages) == 8  # four questions and four answers ...
    assert len(await _parts(core)) == 1 + 8  # ... each stored once, beside the tools
    # the last record repeats 15 messages, 8 of them long, in less than one long message's text
    assert sizes[-1] - sizes[0] < len("I have a lot to say about this. " * 40)


async def test_a_stored_message_is_redacted(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    secret = "sk-live-qrstuvwxyzabcdef987654"
    remember([secret])
    message = {"role": "user", "content": f"My key is {secret}. " + "More words here. " * 40}
    diagnostics = {"requests": [{"step": 0, "body": {"model": "m", "messages": [message]}}]}
    shared = await _shared(core.db, diagnostics, chat)
    digest = shared["requests"][0]["body"]["messages"][0][request_parts.REF]
    assert diagnostics["requests"][0]["body"]["messages"][0] is message  # the input untouched
    async with core.session() as s:
        value = (await s.execute(text("SELECT value FROM request_parts WHERE digest = :d"),
                                 {"d": digest})).scalar_one()
    assert secret not in str(value) and "***" in str(value)


async def test_a_message_is_named_by_its_whole_size_not_its_text_alone(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    """A call with arguments and no text is as long as its JSON and is kept apart; a short
    text stays inline, whatever its characters."""
    call = {"role": "assistant", "content": "", "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "write_file", "arguments": json.dumps({"text": "x" * 600})}}]}
    short = {"role": "user", "content": "\u0001" * 70}  # 420 bytes escaped: under the size
    messages = [short, call, {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    diagnostics = {"requests": [{"step": 0, "body": {"model": "m", "messages": messages}}]}
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    assert await _shared(core.db, diagnostics) is diagnostics  # of no chat: inline
    shared = await _shared(core.db, diagnostics, chat)
    stored = shared["requests"][0]["body"]["messages"]
    assert stored[0] == short and stored[2] == messages[2]
    assert list(stored[1]) == [request_parts.REF]
    async with core.session() as s:
        back = await request_parts.resolved(s, shared)
    assert back["requests"][0]["body"]["messages"] == messages


async def test_a_chats_message_parts_go_with_the_chat(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    """A deleted chat leaves none of its messages behind in the parts; another chat that sent
    the same long message keeps its own copy, and the tool definitions (no chat's) stay."""
    connection = await fake_connection(client, openai_fake)
    kept, gone = await new_chat(client, connection), await new_chat(client, connection)
    words = "The same long story, told in two chats. " * 20
    for chat in (kept, gone):
        openai_fake.script.reply("Fine.")
        await stream(client, chat, words)
    async with core.session() as s:
        owners = (await s.execute(text(
            "SELECT chat_id, count(*) FROM request_parts GROUP BY chat_id"))).all()
    assert sorted(owners, key=str) == sorted([(None, 1), (kept, 1), (gone, 1)], key=str)
    assert (await client.delete(f"/v1/chats/{gone}")).status_code == 204
    async with core.session() as s:
        left = (await s.execute(text("SELECT chat_id, value FROM request_parts"))).all()
    assert sorted(chat for chat, _ in left if chat is not None) == [kept]
    assert all("two chats" not in json.dumps(value) for chat, value in left if chat != kept)
    openai_fake.script.reply("Fine.")
    tour_id = one(await stream(client, kept, "And now?"), "tour")["tour_id"]
    tour = await tour_of(client, tour_id)  # the kept chat's record still resolves whole
    assert tour["diagnostics"]["requests"][0]["body"] == openai_fake.generation_requests[-1].json


async def test_parts_stored_already_are_looked_up_once_not_written_again(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once their minute as known has passed, a long chat's parts all come back to be checked:
    one lookup finds them, and only the new one is written (redacted and inserted)."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    messages = [{"role": "user", "content": f"Story part {i}. " + "Words upon words. " * 40}
                for i in range(6)]

    def diagnostics(count: int) -> dict[str, Any]:
        return {"requests": [{"step": 0, "body": {"model": "m", "messages": messages[:count]}}]}

    first = await _shared(core.db, diagnostics(5), chat)
    later = time.monotonic() + request_parts.KNOWN_SECONDS + 1
    monkeypatch.setattr(request_parts, "_now", lambda: later)
    written: list[str] = []
    real = request_parts.redact_json

    def counting(value: Any) -> Any:
        written.append(value["content"][:13])
        return real(value)

    monkeypatch.setattr(request_parts, "redact_json", counting)
    again = await _shared(core.db, diagnostics(6), chat)
    assert written == ["Story part 5."]  # the five stored ones neither redacted nor written
    assert again["requests"][0]["body"]["messages"][:5] == \
        first["requests"][0]["body"]["messages"]
    assert len(await _parts(core)) == 6
    async with core.session() as s:
        back = await request_parts.resolved(s, again)
    assert back["requests"][0]["body"]["messages"] == messages


async def test_a_part_missing_from_the_database_is_shown_as_its_reference(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("Fine.")
    tour_id = one(await stream(client, chat, "Hi."), "tour")["tour_id"]
    async with core.session() as s:
        await s.execute(text("DELETE FROM request_parts"))
    tour = await tour_of(client, tour_id)  # no error: the record is shown as it is stored
    tools = tour["diagnostics"]["requests"][0]["body"]["tools"]
    assert list(tools) == [request_parts.REF]


async def test_a_part_that_cannot_be_stored_stays_in_the_record(
        client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    async with core.session() as s:  # the parts' table is gone: storing one fails
        await s.execute(text("ALTER TABLE request_parts RENAME TO request_parts_away"))
    try:
        openai_fake.script.reply("Fine.")
        tour_id = one(await stream(client, chat, "Hi. " * 200), "tour")["tour_id"]
        tour = await tour_of(client, tour_id)
    finally:
        async with core.session() as s:
            await s.execute(text("ALTER TABLE request_parts_away RENAME TO request_parts"))
    assert tour["status"] == "completed"
    stored = await _stored_requests(core, tour_id)
    assert stored[0]["body"] == openai_fake.generation_requests[-1].json  # tools and messages
    assert await _parts(core) == []


def _diagnostics(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"requests": [{"step": 0, "body": {"model": "m", "messages": [], "tools": tools}}]}


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object"}}}


async def test_each_tool_set_is_its_own_part_and_small_ones_stay_inline(core: Core) -> None:
    many = [_tool(f"tool_{i}", "A tool that does something useful. " * 4) for i in range(8)]
    other = [*many[:-1], _tool("another", "Something else entirely. " * 4)]
    small = [_tool("tiny", "Small.")]
    first = await _shared(core.db, _diagnostics(many))
    again = await _shared(core.db, _diagnostics(many))
    second = await _shared(core.db, _diagnostics(other))
    inline = await _shared(core.db, _diagnostics(small))
    ref = first["requests"][0]["body"]["tools"]
    assert again["requests"][0]["body"]["tools"] == ref
    assert second["requests"][0]["body"]["tools"] != ref
    assert inline["requests"][0]["body"]["tools"] == small
    assert len(await _parts(core)) == 2
    async with core.session() as s:
        back = await request_parts.resolved(s, {"requests": [
            first["requests"][0], second["requests"][0], inline["requests"][0]]})
    assert [r["body"]["tools"] for r in back["requests"]] == [many, other, small]


async def test_a_stored_part_is_redacted(core: Core) -> None:
    secret = "sk-live-abcdefghijklmnop123456"
    remember([secret])
    tools = [_tool(f"tool_{i}", "Calls the service. " * 8) for i in range(6)]
    tools[0]["function"]["description"] = f"Calls with key {secret}."
    shared = await _shared(core.db, _diagnostics(tools))
    digest = shared["requests"][0]["body"]["tools"][request_parts.REF]
    async with core.session() as s:
        value = (await s.execute(text("SELECT value FROM request_parts WHERE digest = :d"),
                                 {"d": digest})).scalar_one()
    assert secret not in str(value) and "***" in str(value)


async def test_two_instances_storing_the_same_part_at_once_both_name_it(core: Core) -> None:
    """Two instances on one database meet a new tool set at the same moment: one stores the
    part, the other finds it stored, and both records name it (none keeps it inline)."""
    from evacore.store.db import Database, create_engine

    other = Database(create_engine(core.settings.db_url))
    try:
        for db in (core.db, other):  # both connected already: their statements interleave
            async with db.session() as s:
                await s.execute(text("SELECT 1"))
        tools = [_tool(f"tool_{i}", "Shared by two instances. " * 6) for i in range(6)]
        here, there = await asyncio.gather(
            _shared(core.db, _diagnostics(tools)),
            _shared(other, _diagnostics(tools)))
    finally:
        await other.engine.dispose()
    assert here["requests"][0]["body"]["tools"] == there["requests"][0]["body"]["tools"]
    assert list(here["requests"][0]["body"]["tools"]) == [request_parts.REF]
    assert len(await _parts(core)) == 1


async def test_a_part_gone_from_the_database_is_stored_again_after_a_while(
        core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database restored (or migrated down and up) under a running server loses parts this
    process took as stored: once `KNOWN_SECONDS` passed they are looked for and stored
    again, so later records never name a missing part for longer than that."""
    tools = [_tool(f"tool_{i}", "Kept across a restore. " * 6) for i in range(6)]
    first = await _shared(core.db, _diagnostics(tools))
    async with core.session() as s:
        await s.execute(text("DELETE FROM request_parts"))
    soon = await _shared(core.db, _diagnostics(tools))  # within the minute
    assert soon == first and await _parts(core) == []
    later = time.monotonic() + request_parts.KNOWN_SECONDS + 1
    monkeypatch.setattr(request_parts, "_now", lambda: later)
    again = await _shared(core.db, _diagnostics(tools))
    assert again == first and len(await _parts(core)) == 1
    async with core.session() as s:
        back = await request_parts.resolved(s, again)
    assert back["requests"][0]["body"]["tools"] == tools
