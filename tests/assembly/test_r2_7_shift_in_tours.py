"""R2.7, R2.6: context shifting through real tours: the sent prompt fits the budget, the
newest input and `main`/`post_history` stay, tool-call groups leave whole, the kept prefix
survives several tours (K), and protected content over the budget fails the tour."""

from __future__ import annotations

import random
from typing import Any

import httpx

from evacore.core import Core
from evacore.pipeline.stages.token_count import MESSAGE_OVERHEAD, REPLY_PRIMING
from evacore.store import chats as chat_store
from evacore.tokenize import get_profile
from tests.assembly._helpers import (
    added_by,
    chat,
    connection,
    messages,
    parse_sse,
    send,
    tour,
)

WORDS = ("river", "lantern", "copper", "meadow", "thistle", "harbour", "quiet", "ember",
         "orchard", "velvet", "signal", "granite", "willow", "morning", "patient",
         "hollow")
MAIN = "Write {{char}}'s next reply in a chat with {{user}}."
POST = "Keep replies short."


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def sent_tokens(profile_name: str, msgs: list[dict[str, Any]]) -> int:
    """The prompt's size counted the way stage 6 counts it, with the tour's own profile."""
    import json

    profile = get_profile(profile_name)
    total = REPLY_PRIMING
    for m in msgs:
        text = m["content"] if isinstance(m["content"], str) else ""
        if m.get("tool_calls"):
            text += json.dumps(m["tool_calls"], separators=(",", ":"), ensure_ascii=False)
        total += profile.count(text) + MESSAGE_OVERHEAD + (1 if m.get("name") else 0)
    return total


async def seed_history(core: Core, chat_id: str, rng: random.Random, count: int,
                       tool_at: tuple[int, ...] = ()) -> dict[int, str]:
    """Insert `count` alternating user/assistant messages; at the indexes in `tool_at` an
    assistant message with a stored tool step. Returns index → message id of those."""
    tool_ids: dict[int, str] = {}
    async with core.session() as s:
        c = await chat_store.get_chat(s, chat_id)
        for i in range(count):
            if i % 2 == 0:
                await chat_store.add_message(s, c, role="user",
                                             content=sentence(rng, rng.randint(6, 30)))
                continue
            msg = await chat_store.add_message(s, c, role="assistant", name="Assistant")
            steps: list[dict[str, Any]] = []
            if i in tool_at:
                call = f"call_{i}"
                steps = [{"text": "Let me look.", "tool_calls": [
                    {"id": call, "name": "read_file", "arguments": '{"path": "notes.txt"}'}],
                    "results": [{"id": call, "content": sentence(rng, 40)}]}]
                tool_ids[i] = msg.id
            await chat_store.add_variant(s, msg, content=sentence(rng, rng.randint(6, 40)),
                                         steps=steps, finish_reason="stop")
    return tool_ids


def kept_ids(diagnostics: dict[str, Any]) -> list[str]:
    """Ids the stages added and nothing removed (plugin hook records name elements by dict)."""
    def ids(items: list[Any]) -> list[str]:
        return [i if isinstance(i, str) else i["id"] for i in items]

    changes = diagnostics["changes"]
    removed = {i for c in changes for i in ids(c.get("removed", []))}
    return [i for c in changes for i in ids(c.get("added", [])) if i not in removed]


def check_tool_pairs(msgs: list[dict[str, Any]]) -> int:
    """Every sent tool call is answered right after it, every tool result has its call."""
    pairs = 0
    for i, m in enumerate(msgs):
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [c["id"] for c in m["tool_calls"]]
            results = [r["tool_call_id"] for r in msgs[i + 1: i + 1 + len(calls)]]
            assert results == calls
            pairs += 1
        if m["role"] == "tool":
            prev = msgs[i - 1]
            assert prev["role"] in ("assistant", "tool")
    return pairs


def common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


async def test_r2_7_long_chat_fits_keeps_groups_and_prefix(client: httpx.AsyncClient,
                                                           core: Core) -> None:
    """1024-token context, 128 reserved: 40 tours over a chat already past the budget."""
    rng = random.Random(7)
    conn = await connection(client, context_size=1024, max_tokens=128,
                            params={"system_prompt": MAIN, "post_history": POST})
    chat_id = await chat(client, conn)
    tool_ids = await seed_history(core, chat_id, rng, 40, tool_at=(25, 31))
    firsts: list[str] = []
    cuts, groups_cut, stable_checked = 0, set(), 0
    previous: list[dict[str, Any]] | None = None
    previous_retrieved = 0
    survived = 0
    for turn in range(40):
        text = sentence(rng, rng.randint(2, 9))
        answer = await send(client, chat_id, text)
        diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
        msgs = diagnostics["requests"][0]["body"]["messages"]
        tokens = diagnostics["tokens"]
        assert tokens["budget"] == 1024 - 128
        assert sent_tokens(tokens["profile"], msgs) <= tokens["budget"], turn
        # protected: main first, post_history last, the newest input right before it
        assert msgs[0] == {"role": "system", "content":
                           "Write Assistant's next reply in a chat with User."}
        assert msgs[-1] == {"role": "system", "content": POST}
        assert msgs[-2] == {"role": "user", "content": text}
        kept = kept_ids(diagnostics)
        # everything removed is listed in diagnostics, with its size and reason
        listed = diagnostics["shift"]["removed"]
        assert {r["id"] for r in listed} == {
            r["id"] for c in diagnostics["changes"] if c["stage"] == "context_shift"
            for r in c["removed"]}
        assert all(r["tokens"] > 0 and r["reason"] in ("window", "history") for r in listed)
        for message_id in tool_ids.values():  # a call, its result and its text go together
            group = [i for i in added_by(diagnostics, "character")
                     if i.startswith(f"history:{message_id}")]
            if not group:
                continue
            assert len(group) == 3
            states = {i in kept for i in group}
            assert len(states) == 1, (turn, group, kept)
            if states == {False}:
                groups_cut.add(message_id)
        check_tool_pairs(msgs)
        history = [i for i in kept if i.startswith("history:")]
        first = history[0].split(":")[1]
        prefix = diagnostics["shift"]["prefix"]  # how many turns the kept prefix survived
        if firsts and first != firsts[-1]:
            assert prefix["changed"] and prefix["turns"] == 1, (turn, prefix)
            assert prefix["previous_turns"] == survived, (turn, prefix)
            survived = 1
        else:
            survived = survived + 1 if firsts else 1
            assert prefix["turns"] == survived and not prefix["changed"], (turn, prefix)
        if firsts and first != firsts[-1]:
            cuts += 1
        elif previous is not None:
            # no cut: everything the last tour sent before its retrieval results (stage 5
            # puts them right before the input), its input and post_history is sent again
            stable = common_prefix(previous, msgs)
            assert stable >= len(previous) - 2 - previous_retrieved, (turn, stable)
            stable_checked += 1
        firsts.append(first)
        previous = msgs
        previous_retrieved = sum(1 for i in kept if i.startswith("retrieval:"))
    k = len(firsts) / (cuts + 1)
    print(f"R2.7 K (1024/128 context, 40 tours): {k:.2f} tours per kept prefix, {cuts} cuts")
    assert cuts >= 3  # the chat really shifted, more than once
    assert groups_cut == set(tool_ids.values())  # both tool groups left, whole
    assert k >= 5, f"K={k:.2f}"
    assert stable_checked == len(firsts) - 1 - cuts


async def test_r2_7_protected_over_budget_fails_with_sizes(client: httpx.AsyncClient) -> None:
    conn = await connection(client, context_size=1024, max_tokens=128,
                            params={"system_prompt": MAIN})
    chat_id = await chat(client, conn)
    huge = "word " * 1500  # the input alone is far beyond the 896-token budget
    r = await client.post(f"/v1/chats/{chat_id}/generate",
                          json={"message": {"content": huge}, "stream": False})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "context_overflow"
    assert "896" in error["message"] and "tokens" in error["message"]
    needed = int(error["message"].split("needs ")[1].split(" ")[0])
    assert needed > 896
    stored = await messages(client, chat_id)
    assert [m["role"] for m in stored] == ["user"] and stored[0]["content"] == huge

    r = await client.post(f"/v1/chats/{chat_id}/generate",
                          json={"message": {"content": huge + "again"}, "stream": True})
    assert r.status_code == 200
    events = parse_sse(r.text)
    assert events[-1][0] == "error" and events[-1][1]["code"] == "context_overflow"
    assert "budget is 896" in events[-1][1]["message"]
    assert "done" not in [n for n, _ in events]
    stored = await messages(client, chat_id)
    assert [m["role"] for m in stored] == ["user", "user"]
    tour_id = next(d["tour_id"] for n, d in events if n == "tour")
    t = await tour(client, tour_id)
    assert t["status"] == "failed" and t["error"]["code"] == "context_overflow"


async def test_r2_7_text_mode_prompt_fits_the_budget(client: httpx.AsyncClient, core: Core,
                                                     openai_text_fake: Any) -> None:
    """A text template's sequences, story-string frame and generation line count too: the
    rendered prompt, counted whole with the same profile, stays within the budget."""
    rng = random.Random(11)
    conn = await connection(client, "openai-text", base_url=openai_text_fake.base_url,
                            api_key="k", model="fake-model", instruct="ChatML",
                            context_size=1024, max_tokens=128,
                            params={"system_prompt": MAIN, "post_history": POST})
    chat_id = await chat(client, conn)
    await seed_history(core, chat_id, rng, 60)
    profile = get_profile("heuristic")
    sizes = []
    for _ in range(6):
        openai_text_fake.script.reply(sentence(rng, rng.randint(4, 30)))
        text = sentence(rng, rng.randint(2, 20))
        answer = await send(client, chat_id, text)
        diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
        prompt = diagnostics["requests"][0]["body"]["prompt"]
        assert diagnostics["tokens"]["profile"] == "heuristic"
        assert prompt.endswith(f"{text}<|im_end|>\n<|im_start|>system\n{POST}<|im_end|>\n"
                               "<|im_start|>assistant\n")
        sizes.append(profile.count(prompt))
    assert max(sizes) <= 1024 - 128, sizes
    assert max(sizes) > (1024 - 128) * 0.6, sizes  # the history really fills the window


async def test_r2_7_a_chat_longer_than_one_history_read_is_sent_whole(
        client: httpx.AsyncClient, core: Core) -> None:
    """260 stored messages (the first read takes the newest 200): the rest is read in the
    same read session, and the prompt holds every message, oldest first, once."""
    from evacore.pipeline.stages.macros import HISTORY_BATCH

    rng = random.Random(11)
    conn = await connection(client, context_size=200_000, max_tokens=64)
    chat_id = await chat(client, conn)
    count = HISTORY_BATCH + 60
    await seed_history(core, chat_id, rng, count)
    answer = await send(client, chat_id, "And now?")
    diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
    history = [i for i in added_by(diagnostics, "character") if i.startswith("history:")]
    stored = (await client.get(f"/v1/chats/{chat_id}/messages",
                               params={"limit": 1000})).json()["messages"]
    assert [f"history:{m['id']}" for m in stored[:count]] == history[:count]
    assert len(history) == count + 1 and len(set(history)) == count + 1  # and the input
    msgs = diagnostics["requests"][0]["body"]["messages"]
    assert msgs[-1] == {"role": "user", "content": "And now?"}
    assert sum(1 for m in msgs if m["role"] in ("user", "assistant")) == count + 1
