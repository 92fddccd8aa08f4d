"""Benchmark prompt assembly (stages 1-9) on long chats: 1,000 / 10,000 / 100,000 messages,
a 20-entry constant lorebook, a 32k-token budget, against a Core on a temporary SQLite file.

Must not: call a provider (stages 10-14 never run) or touch any database but its own
temporary one. Sizes are measured interleaved over several rounds; the ratio p50(100k) /
p50(1k) shows whether assembly cost follows the kept history (flat) or the chat's length.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.domain.ids import new_id, utcnow
from evacore.domain.roles import env_for_role
from evacore.lore.model import Lorebook, LoreEntry
from evacore.memory.index import backfill
from evacore.pipeline.reads import end_reads
from evacore.pipeline.runner import ASSEMBLE, run_stage
from evacore.pipeline.tour import Tour
from evacore.store import lorebooks as lore_repo
from evacore.store.tables import Character, Chat, Connection, LorebookLink, Message, Variant

CONTEXT_SIZE = 33_792
MAX_TOKENS = 1_024
"""Budget = 32,768 tokens."""
LORE_ENTRIES = 20
TARGET_RATIO = 1.5
HISTORY_STAGES = ("macros", "character", "token_count", "context_shift")
WORDS = ("river", "lantern", "copper", "meadow", "thistle", "harbour", "quiet", "ember",
         "orchard", "velvet", "signal", "granite", "willow", "morning", "patient",
         "hollow", "the", "a", "of", "and", "to", "she", "he", "said", "looked")
CARD = {
    "name": "Mira", "description": "{{char}} is a cartographer who maps rivers. " * 30,
    "personality": "curious, patient, dry humour", "scenario": "{{user}} meets {{char}}.",
    "first_mes": "", "mes_example": "<START>\n{{user}}: Hi.\n{{char}}: Hello there.\n" * 3,
    "system_prompt": "", "post_history_instructions": "Stay in character.",
    "alternate_greetings": [], "extensions": {}, "creator_notes": "", "tags": [],
    "creator": "", "character_version": "",
}


def _text(rng: random.Random) -> str:
    """A message of 20-450 tokens (about 70-1,500 characters)."""
    return " ".join(rng.choices(WORDS, k=rng.randint(15, 340))).capitalize() + "."


async def _fill(core: Core, chat_id: str, n: int, seed: int) -> None:
    """`n` alternating user/assistant messages (assistant text in an active variant),
    inserted in bulk."""
    rng = random.Random(seed)
    start = utcnow() - timedelta(days=30)
    for lo in range(0, n, 5_000):
        msgs: list[dict[str, Any]] = []
        variants: list[dict[str, Any]] = []
        for i in range(lo, min(n, lo + 5_000)):
            mid, at = new_id(), start + timedelta(seconds=i)
            row = {"id": mid, "chat_id": chat_id, "position": i, "name": None, "images": [],
                   "hidden": False, "extra": {}, "created_at": at, "active_variant_id": None}
            if i % 2 == 0:
                msgs.append({**row, "role": "user", "content": _text(rng)})
            else:
                vid = new_id()
                msgs.append({**row, "role": "assistant", "content": "",
                             "active_variant_id": vid, "name": CARD["name"]})
                variants.append({"id": vid, "message_id": mid, "content": _text(rng),
                                 "steps": [], "finish_reason": "stop", "status": "complete",
                                 "usage": {}, "timings": {}, "model": "mock", "tour_id": None,
                                 "meta": {}, "created_at": at})
        async with core.session() as s:
            await s.execute(insert(Message.__table__), msgs)
            await s.execute(insert(Variant.__table__), variants)
    async with core.session() as s:
        chat = await s.get(Chat, chat_id)
        assert chat is not None
        chat.next_position = n
    await _index(core, chat_id)


async def _index(core: Core, chat_id: str) -> None:
    """Index the whole chat for retrieval, as a chat that grew one message at a time has
    it; progress is kept where stage 5 keeps it (`chat.state["retrieval"]`)."""
    position = 0
    while True:
        async with core.session() as s:
            done, position = await backfill(s, chat_id, position, 5_000)
        if done == 0:
            break
    async with core.session() as s:
        chat = await s.get(Chat, chat_id)
        assert chat is not None
        chat.state = {**(chat.state or {}), "retrieval": {"indexed_to": position}}


async def _save_state(core: Core, tour: Tour) -> None:
    """What stage 14 keeps of an assembled tour: the chat's engine state and variables
    (fit anchor, lore timers, retrieval progress), so the next round starts where a real
    next turn would."""
    async with core.session() as s:
        chat = await s.get(Chat, tour.chat_id)
        assert chat is not None
        chat.state = dict(tour.data["chat"]["state"])
        chat.variables = dict(tour.data["chat"]["variables"])


async def _setup(core: Core, sizes: list[int]) -> dict[int, str]:
    async with core.session() as s:
        conn = Connection(name="bench", kind="mock", context_size=CONTEXT_SIZE,
                          max_tokens=MAX_TOKENS, params={})
        character = Character(name=CARD["name"], spec="v2", data=dict(CARD), extra_top={})
        s.add_all([conn, character])
        await s.flush()
        entries = tuple(
            LoreEntry(uid=i, keys=(f"key{i}",), content=f"Lore fact {i}: " + "detail " * 60,
                      constant=True, order=100 + i)
            for i in range(LORE_ENTRIES))
        book = await lore_repo.save_lorebook(s, Lorebook(name="bench lore", entries=entries))
        chats = {}
        for n in sizes:
            chat = Chat(title=f"{n}", connection_id=conn.id, character_id=character.id,
                        settings={"world_info": {"budget": 100}})
            s.add(chat)
            await s.flush()
            s.add(LorebookLink(lorebook_id=book.id, target_kind="chat", target_id=chat.id))
            chats[n] = chat.id
    for n, chat_id in chats.items():
        await _fill(core, chat_id, n, seed=n)
    return chats


def _tour(chat_id: str, text: str) -> Tour:
    """A tour as `POST /v1/chats/{id}/generate` builds it for the master, non-stream."""
    env = env_for_role("master")
    env["client_ops"] = False
    env["picture"] = False
    return Tour(chat_id=chat_id, user_id=None, role="master", mode="normal", stream=False,
                env=env, env_overrides=None, input_text=text, input_images=[], params={},
                client_ops=[])


async def _assemble(core: Core, chat_id: str, text: str) -> tuple[float, Tour]:
    tour = _tour(chat_id, text)
    started = time.perf_counter()
    try:
        for stage in ASSEMBLE:
            await run_stage(core, tour, stage)
    finally:
        await end_reads(tour)  # the read session stages 2-5 share, ended as the runner does
    return (time.perf_counter() - started) * 1000, tour


async def _measure(sizes: list[int], rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), master_token="evc_bench_master_token_0123456789",
                            log_level="WARNING", log_format="json")
        core = await start_core(settings)
        try:
            t0 = time.perf_counter()
            chats = await _setup(core, sizes)  # bulk insert and retrieval index
            setup_s = time.perf_counter() - t0
            rng = random.Random(3)
            samples: dict[int, list[float]] = {n: [] for n in sizes}
            stages: dict[int, dict[str, list[float]]] = {n: {} for n in sizes}
            shape: dict[int, dict[str, Any]] = {}
            for r in range(rounds + 1):  # round 0 warms caches and indexes, not counted
                order = list(sizes)
                rng.shuffle(order)
                for n in order:
                    ms, tour = await _assemble(core, chats[n], f"Round {r}: {_text(rng)}")
                    await _save_state(core, tour)
                    if r == 0:
                        continue
                    samples[n].append(ms)
                    for name, value in tour.timings.items():
                        stages[n].setdefault(name, []).append(value)
                    tokens = tour.diagnostics.get("tokens", {})
                    shape[n] = {
                        "elements": len(tour.prompt),
                        "history": len(tour.prompt.of_kind("history")),
                        "lore": len(tour.prompt.of_kind("lore")),
                        "fitted": tokens.get("fitted"), "budget": tokens.get("budget"),
                        "loaded": tour.data.get("history_loaded"),
                    }
        finally:
            await core.aclose()
    return {"samples": samples, "stages": stages, "shape": shape, "setup_s": setup_s}


def _stage_p50(out: dict[str, Any], n: int, names: tuple[str, ...] | None = None) -> float:
    """p50 over rounds of the summed time of the named stages (all when None)."""
    per_stage = out["stages"][n]
    rounds = len(out["samples"][n])
    sums = [sum(v[r] for k, v in per_stage.items() if names is None or k in names)
            for r in range(rounds)]
    return statistics.median(sums)


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    rounds = 5 if quick else 9
    out = asyncio.run(_measure(sizes, rounds))
    rows: list[dict[str, Any]] = []
    p50 = {n: statistics.median(v) for n, v in out["samples"].items()}
    for n in sizes:
        shape = out["shape"][n]
        slow = sorted(((statistics.median(v), k) for k, v in out["stages"][n].items()),
                      reverse=True)[:3]
        rows.append({
            "bench": "assembly", "metric": f"p50 stages 1-9, {n:,} messages", "value":
            round(p50[n], 1), "unit": "ms", "target": None, "met": None,
            "note": (f"{rounds} rounds interleaved; prompt {shape['elements']} elements "
                     f"({shape['history']} history, {shape['lore']} lore), "
                     f"{shape['fitted']}/{shape['budget']} tokens, {shape['loaded']} messages "
                     "read; slowest stages "
                     + ", ".join(f"{k} {v:.1f} ms" for v, k in slow)),
        })
    small, big = sizes[0], sizes[-1]
    ratio = p50[big] / p50[small]
    growth = sorted(((statistics.median(out["stages"][big][k])
                      - statistics.median(out["stages"][small][k]), k)
                     for k in out["stages"][big]), reverse=True)[:2]
    rows.append({
        "bench": "assembly", "metric": f"p50({big // 1000}k) / p50(1k), stages 1-9",
        "value": round(ratio, 2), "unit": "x", "target": f"<= {TARGET_RATIO}",
        "met": ratio <= TARGET_RATIO,
        "note": ("most growth: " + ", ".join(f"{k} +{d:.1f} ms" for d, k in growth)
                 + f"; setup (bulk insert and retrieval index) {out['setup_s']:.0f} s; "
                 f"32,768-token budget, {LORE_ENTRIES} constant lore entries per chat"),
    })
    path = _stage_p50(out, big, HISTORY_STAGES) / _stage_p50(out, small, HISTORY_STAGES)
    rows.append({
        "bench": "assembly", "metric": f"p50({big // 1000}k) / p50(1k), history path",
        "value": round(path, 2), "unit": "x", "target": f"<= {TARGET_RATIO}",
        "met": path <= TARGET_RATIO,
        "note": ("stages 2, 3, 6, 7 (history read newest-first, assembly, counting, fitting): "
                 + ", ".join(f"{n // 1000}k {_stage_p50(out, n, HISTORY_STAGES):.1f} ms"
                             for n in sizes)),
    })
    return rows


if __name__ == "__main__":
    import sys

    for row in run(quick="--quick" in sys.argv):
        print(row)
