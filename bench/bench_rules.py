"""Benchmark of R6.7's "zero added latency": time to the first delta of a master tour with the
six seeded stream rules present but none armed (no telegram / picture / client_ops flag), against
the same tour on a database with no rules at all, and on a core without the rules service. The
cores run side by side, tours interleaved, in ongoing chats (a pool per core).

Must not: touch the network or the operator's data: two Cores on temporary SQLite files, the
offline `mock` provider, nothing kept.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_RATIO = 1.05
ANSWER = "The picnic is on: sunny, 24 degrees, light wind from the west, no rain at all."


CHATS = 8


async def _core(data_dir: Path, *, keep_rules: bool, service: bool = True) -> tuple[Any, str, list[str]]:
    from sqlalchemy import delete, select

    from evacore.config import Settings
    from evacore.core import start_core
    from evacore.store.tables import Chat, Connection, StreamRule, User

    settings = Settings(
        data_dir=data_dir, database_url=f"sqlite+aiosqlite:///{data_dir / 'bench.db'}",
        master_token=secrets.token_urlsafe(24), log_format="json", log_level="WARNING",
    )
    core = await start_core(settings)
    async with core.session() as s:
        if not keep_rules:
            await s.execute(delete(StreamRule))
        user = (await s.scalars(select(User).where(User.role == "master"))).one()
        conn = Connection(name="bench", kind="mock", model="mock", context_size=8192,
                          max_tokens=512, tokenizer="heuristic",
                          params={"script": [{"text": ANSWER}]})
        s.add(conn)
        await s.flush()
        chats = [Chat(title="bench", connection_id=conn.id, user_id=user.id)
                 for _ in range(CHATS)]
        s.add_all(chats)
        await s.flush()
        chat_ids = [chat.id for chat in chats]
    if not service:
        rules, core.rules = core.rules, None
        core.save_hooks[:] = [hook for hook in core.save_hooks
                              if getattr(hook, "__self__", None) is not rules]
    return core, user.id, chat_ids


async def _first_delta_ms(core: Any, user_id: str, chats: list[str]) -> float:
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour

    chats.append(chat_id := chats.pop(0))  # round robin over ongoing chats
    tour = Tour(chat_id=chat_id, user_id=user_id, role="master", env=env_for_role("master"),
                input_text="Is the picnic still on tomorrow?")
    started = time.perf_counter()
    task = core.tours.start(tour)
    first = None
    async for name, _ in tour.events:
        if name == "delta" and first is None:
            first = (time.perf_counter() - started) * 1000
        if name == "hold":
            raise AssertionError("a rule is armed in the benchmark tour")
    await task
    if first is None:
        raise AssertionError(f"the tour gave no delta: {tour.error}")
    return first


async def _loader_ms(core: Any, user_id: str, chats: list[str], rounds: int) -> float:
    """p50 of the rules loader alone (the per-tour cost: version check, repeat records)."""
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour
    from evacore.pipeline.tour_tools import tools_for_tour

    tour = Tour(chat_id=chats[0], user_id=user_id, role="master", env=env_for_role("master"))
    tour.data["chat"] = {"turn": 3, "state": {"stream_rules": {"last_fired": {}}}}
    tour.data["tools"] = tools_for_tour(core, tour)
    load = core.rules.load_for_tour
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await load(tour)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def _measure(tours: int) -> tuple[dict[str, list[float]], list[str], float]:
    with tempfile.TemporaryDirectory(prefix="evacore-bench-rules-") as tmp:
        sides = {
            "seeded": await _core(Path(tmp) / "seeded", keep_rules=True),
            "empty": await _core(Path(tmp) / "empty", keep_rules=False),
            "off": await _core(Path(tmp) / "off", keep_rules=False, service=False),
        }
        try:
            seeded = sides["seeded"]
            async with seeded[0].session() as s:
                loaded = (await seeded[0].rules.ruleset(s)).names
            for _ in range(2):  # warm every path and every chat (imports, caches, SQLite pages)
                for side in sides.values():
                    for _ in range(CHATS):
                        await _first_delta_ms(*side)
            samples: dict[str, list[float]] = {name: [] for name in sides}
            order = list(sides)
            for i in range(tours):
                for name in order[i % 3:] + order[: i % 3]:  # rotate who goes first
                    samples[name].append(await _first_delta_ms(*sides[name]))
            return samples, loaded, await _loader_ms(*seeded, max(50, tours))
        finally:
            for side in sides.values():
                await side[0].aclose()


def run(quick: bool = False) -> list[dict[str, Any]]:
    from evacore.logs import configure_logging

    configure_logging("json", "WARNING")
    tours = 40 if quick else 300
    samples, loaded, loader_ms = asyncio.run(_measure(tours))
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    ratio = p50["seeded"] / p50["empty"]
    ratio_off = p50["seeded"] / p50["off"]
    paired = statistics.median(
        a / b for a, b in zip(samples["seeded"], samples["empty"], strict=True))
    note = f"{tours} master tours per side, interleaved, {CHATS} ongoing chats, mock, SQLite"
    return [
        {"bench": "rules", "metric": "ttfd_p50_seeded_rules_ms", "value": round(p50["seeded"], 2),
         "unit": "ms", "target": None, "met": None,
         "note": f"{len(loaded)} rules loaded, none armed; {note}"},
        {"bench": "rules", "metric": "ttfd_p50_no_rules_ms", "value": round(p50["empty"], 2),
         "unit": "ms", "target": None, "met": None, "note": f"empty rules table; {note}"},
        {"bench": "rules", "metric": "ttfd_p50_rules_off_ms", "value": round(p50["off"], 2),
         "unit": "ms", "target": None, "met": None,
         "note": f"no rules service at all (no loader, no save hook); {note}"},
        {"bench": "rules", "metric": "ttfd_ratio", "value": round(ratio, 3), "unit": "x",
         "target": f"<= {TARGET_RATIO}", "met": bool(ratio <= TARGET_RATIO),
         "note": "p50 with seeded rules / p50 without rules (time to the first delta); "
                 f"median of paired ratios {paired:.3f}; vs no rules service {ratio_off:.3f}"},
        {"bench": "rules", "metric": "loader_p50_ms", "value": round(loader_ms, 3),
         "unit": "ms", "target": None, "met": None,
         "note": "the per-tour rules load alone, in an ongoing chat with a fresh rule set"},
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
