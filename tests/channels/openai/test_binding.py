"""R14.1 conversation binding: the history continues a chat, the same request again is a new
variant of its answer, anything else is a new chat holding the history; `X-Evacore-Chat`
names the chat; chats are matched among one caller's own only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from evacore.core import Core
from tests.channels.openai.conftest import add_character, messages, sdk, sent_messages
from tests.conftest import make_user
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.both_backends


async def ask(oai: openai.AsyncOpenAI, msgs: list[dict], **kw) -> tuple[str, str, str]:
    """(answer text, chat id, tour id)."""
    raw = await oai.chat.completions.with_raw_response.create(model="@up", messages=msgs, **kw)
    return (raw.parse().choices[0].message.content or "", raw.headers["x-evacore-chat"],
            raw.headers["x-evacore-tour"])


async def test_r14_1_history_continues_the_chat(oai: openai.AsyncOpenAI,
                                                client: httpx.AsyncClient,
                                                upstream: FakeUpstream) -> None:
    upstream.script.reply("First answer.").reply("Second answer.")
    convo = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "One?"}]
    first, chat, tour1 = await ask(oai, convo)
    convo += [{"role": "assistant", "content": first}, {"role": "user", "content": "Two?"}]
    second, chat2, tour2 = await ask(oai, convo)
    assert chat2 == chat and tour2 != tour1 and second == "Second answer."
    stored = await messages(client, chat)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "One?"), ("assistant", "First answer."), ("user", "Two?"),
        ("assistant", "Second answer.")]
    # the second request's prompt came from the chat: history and the new message
    sent = [(m["role"], m["content"]) for m in sent_messages(upstream) if m["role"] != "system"]
    assert sent == [("user", "One?"), ("assistant", "First answer."), ("user", "Two?")]


async def test_r14_1_same_request_twice_is_a_second_variant(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.reply("Take one.").reply("Take two.")
    convo = [{"role": "user", "content": "Tell me a joke."}]
    a, chat, _ = await ask(oai, convo)
    b, chat2, _ = await ask(oai, convo)
    assert chat2 == chat and (a, b) == ("Take one.", "Take two.")
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert [v["content"] for v in stored[1]["variants"]] == ["Take one.", "Take two."]
    assert stored[1]["content"] == "Take two."
    # and the conversation goes on from the variant the client got last
    upstream.script.reply("Glad you liked it.")
    _, chat3, _ = await ask(oai, [*convo, {"role": "assistant", "content": b},
                                  {"role": "user", "content": "Ha!"}])
    assert chat3 == chat and len(await messages(client, chat)) == 4


async def test_r14_1_unknown_history_is_a_new_chat_holding_it(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.reply("Seen before.").reply("Brand new.")
    _, known, _ = await ask(oai, [{"role": "user", "content": "Hello"}])
    convo = [{"role": "user", "content": "Earlier question"},
             {"role": "assistant", "content": "Earlier answer"},
             {"role": "user", "content": "And now?"}]
    answer, chat, _ = await ask(oai, convo)
    assert chat != known and answer == "Brand new."
    stored = await messages(client, chat)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Earlier question"), ("assistant", "Earlier answer"), ("user", "And now?"),
        ("assistant", "Brand new.")]
    sent = [(m["role"], m["content"]) for m in sent_messages(upstream) if m["role"] != "system"]
    assert sent == [("user", "Earlier question"), ("assistant", "Earlier answer"),
                    ("user", "And now?")]


async def test_r14_1_x_evacore_chat_names_the_chat(oai: openai.AsyncOpenAI,
                                                   client: httpx.AsyncClient,
                                                   upstream: FakeUpstream) -> None:
    upstream.script.reply("Noted.").reply("You said apples.")
    _, chat, _ = await ask(oai, [{"role": "user", "content": "I like apples."}])
    # only the new message, the chat named: its own history is the context
    answer, chat2, _ = await ask(oai, [{"role": "user", "content": "What do I like?"}],
                                 extra_headers={"X-Evacore-Chat": chat})
    assert chat2 == chat and answer == "You said apples."
    assert [m["content"] for m in await messages(client, chat)] == [
        "I like apples.", "Noted.", "What do I like?", "You said apples."]
    with pytest.raises(openai.NotFoundError):
        await ask(oai, [{"role": "user", "content": "x"}],
                  extra_headers={"X-Evacore-Chat": "no-such-chat"})


async def test_r14_1_the_same_request_to_a_named_chat_again_is_a_second_variant(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.reply("Hello.").reply("Red.").reply("Blue.").reply("Green.")
    _, chat, _ = await ask(oai, [{"role": "user", "content": "Hi."}])
    ask_colour = [{"role": "user", "content": "A colour?"}]
    named = {"X-Evacore-Chat": chat}
    first, _, _ = await ask(oai, ask_colour, extra_headers=named)
    again, chat2, _ = await ask(oai, ask_colour, extra_headers=named)
    assert chat2 == chat and (first, again) == ("Red.", "Blue.")
    stored = await messages(client, chat)
    assert [m["content"] for m in stored] == ["Hi.", "Hello.", "A colour?", "Blue."]
    assert [v["content"] for v in stored[3]["variants"]] == ["Red.", "Blue."]
    # another message to the named chat is a new turn, not a variant
    other, _, _ = await ask(oai, [{"role": "user", "content": "Another?"}], extra_headers=named)
    assert other == "Green." and len(await messages(client, chat)) == 6


async def test_r14_1_chats_are_matched_among_the_callers_own(
    app: FastAPI, oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.reply("For the master.").reply("For the guest.")
    convo = [{"role": "user", "content": "Same words"}]
    _, mine, _ = await ask(oai, convo)
    token = await make_user(client, "guest", "visitor")
    async with sdk(app, token) as guest:
        answer, theirs, _ = await ask(guest, convo)
        assert theirs != mine and answer == "For the guest."
        with pytest.raises(openai.NotFoundError):  # someone else's chat does not exist
            await ask(guest, convo, extra_headers={"X-Evacore-Chat": mine})
    # another end user (OpenAI's `user` field) of the same token gets a chat of its own
    upstream.script.reply("For Ann.")
    _, ann, _ = await ask(oai, convo, user="ann")
    assert ann not in (mine, theirs)


async def test_r14_1_a_failed_answer_is_retried_in_the_same_chat(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.error(500, "down")
    convo = [{"role": "user", "content": "Are you there?"}]
    with pytest.raises(openai.APIStatusError) as info:
        await ask(oai, convo)
    chat = info.value.response.headers["x-evacore-chat"]
    upstream.script.reply("Yes, now I am.")
    answer, chat2, _ = await ask(oai, convo)
    assert chat2 == chat and answer == "Yes, now I am."
    stored = await messages(client, chat)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Are you there?"), ("assistant", "Yes, now I am.")]


async def test_r14_1_a_chat_named_with_another_model_stays_bound_to_its_own(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    """A chat runs with its own character whatever `model` the request naming it says, so
    a later request for that model (without the header) must not find it."""
    await add_character(client, "Orla")
    upstream.script.reply("Orla here.").reply("Still Orla.").reply("A new chat.")
    first = await oai.chat.completions.with_raw_response.create(
        model="Orla@up", messages=[{"role": "user", "content": "Q1"}])
    orla = first.headers["x-evacore-chat"]
    named, chat, _ = await ask(oai, [{"role": "user", "content": "Q2"}],
                               extra_headers={"X-Evacore-Chat": orla})
    assert (named, chat) == ("Still Orla.", orla)
    answer, other, _ = await ask(oai, [{"role": "user", "content": "Q2"},
                                       {"role": "assistant", "content": "Still Orla."},
                                       {"role": "user", "content": "Q3"}])
    assert other != orla and answer == "A new chat."
    assert len(await messages(client, orla)) == 4
    # the same conversation as Orla@up (the chat's own model) goes on in it
    upstream.script.reply("Orla again.")
    again = await oai.chat.completions.with_raw_response.create(model="Orla@up", messages=[
        {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "Still Orla."},
        {"role": "user", "content": "Q3"}])
    assert again.headers["x-evacore-chat"] == orla


@contextmanager
def transactions(core: Core) -> Iterator[list[list[str]]]:
    """The statements run meanwhile, one list per transaction in the order each began, but
    the abort poll's (it runs by the clock). A transaction is one connection's statements up
    to its commit or rollback: another session's commit meanwhile (the abort poll's, a
    heartbeat's) does not split it, though on PostgreSQL its statements interleave."""
    seen: list[list[str]] = []
    open_: dict[int, list[str]] = {}

    def key(conn: Any) -> int:
        return id(conn.connection.dbapi_connection)

    def note(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        text = " ".join(statement.split()).upper()
        if text.startswith("SELECT TOURS.ID") and "ABORT_REQUESTED" in text:
            return
        tx = open_.get(key(conn))
        if tx is None:
            tx = open_[key(conn)] = []
            seen.append(tx)
        tx.append(text)

    def end(conn: Any) -> None:
        open_.pop(key(conn), None)

    engine = core.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    event.listen(engine, "commit", end)
    event.listen(engine, "rollback", end)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)
        event.remove(engine, "commit", end)
        event.remove(engine, "rollback", end)


@pytest.mark.parametrize("paced", [False, True])
async def test_r14_1_a_streamed_answer_is_bound_in_the_transaction_that_saves_it(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, core: Core, upstream: FakeUpstream,
    paced: bool
) -> None:
    """The binding costs no transaction of its own: it goes in with the answer (also when
    tokens came paced, most of them written from the network read), and the streamed
    conversation still finds its chat."""
    words = " ".join(f"w{i}" for i in range(30))
    upstream.script.reply("Warm.").reply(words, token_delay=0.003 if paced else 0.0)
    _, chat, _ = await ask(oai, [{"role": "user", "content": "Warm up."}])
    convo = [{"role": "user", "content": "Warm up."}, {"role": "assistant", "content": "Warm."},
             {"role": "user", "content": "Count."}]
    with transactions(core) as seen:
        async with oai.chat.completions.with_streaming_response.create(
                model="@up", messages=convo, stream=True) as response:
            got = "".join([c.choices[0].delta.content or ""
                           async for c in await response.parse()])
            assert response.headers["x-evacore-chat"] == chat
    assert got == words
    binds = [i for i, tx in enumerate(seen)
             if any(s.startswith(("UPDATE CHAT_BINDINGS", "INSERT INTO CHAT_BINDINGS"))
                    for s in tx)]
    assert len(binds) == 1, seen
    assert any(s.startswith("INSERT INTO VARIANTS") for s in seen[binds[0]]), seen
    upstream.script.reply("Thirty.")
    answer, chat2, _ = await ask(oai, [*convo, {"role": "assistant", "content": got},
                                       {"role": "user", "content": "How many?"}])
    assert (chat2, answer) == (chat, "Thirty.")
    assert len(await messages(client, chat)) == 6


def test_a_conversations_digests_are_the_stored_ones_of_before() -> None:
    """Bindings stored earlier hold SHA-256 of the JSON list of the turns' keys: the digests
    built from each turn's key serialized once are those same bytes (a client's chat is still
    found after an upgrade), for the whole conversation, its prior turns and with an answer."""
    import hashlib

    import orjson

    from evacore.channels.openai.conversation import Turn, parse_messages

    def stored(turns: list[Turn]) -> str:
        return hashlib.sha256(orjson.dumps([t.key() for t in turns])).hexdigest()

    conv = parse_messages([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "  Привет, «мир» \u2028 \"quoted\" 🙂  "},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "look", "arguments": {"q": "x"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "And now?"}])
    answer = Turn("assistant", "An answer.", tool_calls=(("c2", "look", "{}"),))
    assert conv.digest() == stored(conv.turns)
    assert conv.digest(prior=True) == stored(conv.prior)
    assert conv.digest(answer) == stored([*conv.turns, answer])
    assert conv.digest(prior=True) != conv.digest()
    one = parse_messages([{"role": "user", "content": "Hi"}])
    assert one.digest(prior=True) == stored([]) and one.digest() == stored(one.turns)
