"""What a tour holds while its answer streams: the messages it sent, not the rows it read
them from nor the prompt elements it built them with. Every tour in flight holds its
chat's whole history for as long as its answer streams (hundreds of milliseconds to
minutes, against a few milliseconds of assembly), so each extra copy of every message is
memory that grows with the streams in flight times the length of their chats."""

from __future__ import annotations

import asyncio
import gc

import httpx

from evacore.pipeline.events import JOIN_AT
from evacore.pipeline.tour import Tour
from evacore.prompt.elements import Element
from evacore.server.routes.generate import GenerateIn
from evacore.store.chats import HistoryMessage
from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, messages, new_chat, stream

EARLIER_TURNS = 4


def _live_history(message_ids: set[str]) -> tuple[int, int]:
    """(stored-history rows, history prompt elements) of the messages `message_ids` alive in
    the process now (garbage collected first: only what something still holds counts)."""
    gc.collect()
    keys = {f"history:{i}" for i in message_ids}
    rows = elements = 0
    for o in gc.get_objects():
        if isinstance(o, HistoryMessage) and o.id in message_ids:
            rows += 1
        elif isinstance(o, Element) and o.source in keys:
            elements += 1
    return rows, elements


async def test_a_streaming_tour_lets_go_of_the_history_rows_and_elements_it_assembled(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    for i in range(EARLIER_TURNS):
        openai_fake.script.reply(f"Earlier answer {i}.")
        await stream(client, chat, f"earlier question {i}")
    stored = {m["id"] for m in await messages(client, chat)}
    assert len(stored) == 2 * EARLIER_TURNS
    slow = " ".join(f"word{i}" for i in range(40))
    openai_fake.script.add(Reply(text=slow, token_delay=0.05))  # about 2 s of streaming
    answer = asyncio.create_task(stream(client, chat, "and now?"))
    for _ in range(500):
        if len(openai_fake.generation_requests) == EARLIER_TURNS + 1:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # a few tokens in: the tour is in its streaming stage
    assert not answer.done()
    held = _live_history(stored)
    events = await answer

    # the request carried the whole history, so assembly read and built all of it
    sent = openai_fake.last_body["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [
        f"Earlier answer {i}." for i in range(EARLIER_TURNS)]
    assert held == (0, 0)
    # and the answer streamed and was saved whole all the same
    assert "done" in [name for name, _ in events]
    assert (await messages(client, chat))[-1]["content"] == slow


def _streaming_tours() -> list[Tour]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, Tour) and "partial" in o.data]


async def test_a_streaming_tour_holds_its_answer_so_far_as_a_few_texts_not_one_per_token(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    """Every relayed token is a text of its own; the answer so far is joined whenever it
    holds `JOIN_AT` of them, so a long answer in flight is a few objects, not one per
    token, and what an abort would keep is still every token in order."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    words = [f"w{i} " for i in range(60)]
    openai_fake.script.add(Reply(text="".join(words), token_delay=0.02))
    answer = asyncio.create_task(stream(client, chat, "a long one"))
    parts: list[str] | None = None
    for _ in range(400):
        await asyncio.sleep(0.01)
        tours = _streaming_tours()
        if tours and len("".join(tours[0].data["partial"])) > len("".join(words[:40])):
            parts = list(tours[0].data["partial"])
            break
    events = await answer
    assert parts is not None, "the tour never streamed 40 of its tokens"
    assert len(parts) < JOIN_AT < 40  # 40 tokens and more in it
    assert "".join(words).startswith("".join(parts))
    assert "".join(e["text"] for name, e in events if name == "delta") == "".join(words)
    assert (await messages(client, chat))[-1]["content"] == "".join(words)


async def test_a_streaming_answer_lets_go_of_the_request_it_was_asked_with(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    """The generate route's call lasts as long as its answer streams: the request as it was
    read (its bytes, its JSON, its validated body) is let go of before, and the tour lets go
    of its expanded input with the rest of what only assembly reads."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.add(Reply(text=" ".join(f"t{i}" for i in range(30)), token_delay=0.03))
    marker = "a question only this request carries " * 40
    answer = asyncio.create_task(stream(client, chat, marker))
    tours: list[Tour] = []
    for _ in range(400):
        await asyncio.sleep(0.01)
        tours = _streaming_tours()
        if tours and tours[0].data["partial"]:
            break
    assert tours, "the tour never streamed"  # and the garbage is collected (`_streaming_tours`)
    bodies = [o for o in gc.get_objects() if isinstance(o, GenerateIn)]
    raw = [o for o in gc.get_objects() if isinstance(o, list) and _holds_raw(o, marker)]
    data_keys = set(tours[0].data)
    events = await answer

    assert bodies == []
    # the text lives on in the stored message and in the request that was sent, not as
    # the request's body as it was read
    assert raw == []
    assert not {"input_expanded", "sysprompt"} & data_keys
    assert "done" in [name for name, _ in events]


def _holds_raw(o: list[object], marker: str) -> bool:
    """A list holding a request body as read: bytes with the marker's text in it, or an
    ASGI message whose body has it."""
    needle = marker.encode()
    for item in o:
        if isinstance(item, bytes) and needle in item:
            return True
        if isinstance(item, dict) and needle in (item.get("body") or b""):
            return True
    return False
