"""Benchmark of R6.7's "zero added latency": time to the first delta of a master tour with the
six seeded stream rules present but none armed (no telegram / picture / client_ops flag), against
the same tour on a database with no rules at all. Both cores run side by side, tours interleaved.

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


async def _core(data_dir: Path, *, keep_rules: bool) -> tuple[Any, str, str]:
    from sqlalchemy import delete, select

    from evacore.config import Settings
    from evacore.core import start_core
    from evacore.store.tables import Connection, StreamRule, User

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
        return core, user.id, conn.id


async def _first_delta_ms(core: Any, user_id: str, connection_id: str) -> float:
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour
    from evacore.store.tables import Chat

    async with core.session() as s:
        chat = Chat(title="bench", connection_id=connection_id, user_id=user_id)
        s.add(chat)
        await s.flush()
        chat_id = chat.id
    tour = Tour(chat_id=chat_id, user_id=user_id, role="master", env=env_for_role("master"),
                input_text="Is the picnic still on tomorrow?")
    started = time.perf_counter()
    task = core.services["tours"].start(tour)
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


async def _loader_ms(core: Any, user_id: str, connection_id: str, rounds: int) -> float:
    """p50 of the rules loader alone (the per-tour cost: version check, repeat records)."""
    from evacore.agent.setup import tools_for_tour
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour

    tour = Tour(chat_id="bench-chat", user_id=user_id, role="master", env=env_for_role("master"))
    tour.data["chat"] = {"turn": 3}
    tour.data["tools"] = tools_for_tour(core, tour)
    load = core.services["rules_loader"]
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await load(core, tour)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def _measure(tours: int) -> tuple[list[float], list[float], list[str], float]:
    with tempfile.TemporaryDirectory(prefix="evacore-bench-rules-") as tmp:
        seeded = await _core(Path(tmp) / "seeded", keep_rules=True)
        empty = await _core(Path(tmp) / "empty", keep_rules=False)
        try:
            async with seeded[0].session() as s:
                loaded = (await seeded[0].services["rules"].ruleset(s)).names
            for _ in range(5):  # warm both paths (imports, caches, SQLite pages)
                await _first_delta_ms(*seeded)
                await _first_delta_ms(*empty)
            with_rules: list[float] = []
            without: list[float] = []
            for i in range(tours):
                pair = ((seeded, with_rules), (empty, without))
                for side, samples in pair if i % 2 == 0 else reversed(pair):
                    samples.append(await _first_delta_ms(*side))
            return with_rules, without, loaded, await _loader_ms(*seeded, max(50, tours))
        finally:
            await seeded[0].aclose()
            await empty[0].aclose()


def run(quick: bool = False) -> list[dict[str, Any]]:
    from evacore.logs import configure_logging

    configure_logging("json", "WARNING")
    tours = 40 if quick else 300
    with_rules, without, loaded, loader_ms = asyncio.run(_measure(tours))
    p50_rules, p50_none = statistics.median(with_rules), statistics.median(without)
    ratio = p50_rules / p50_none
    paired = statistics.median(a / b for a, b in zip(with_rules, without, strict=True))
    note = f"{tours} master tours per side, interleaved, mock provider, SQLite"
    return [
        {"bench": "rules", "metric": "ttfd_p50_seeded_rules_ms", "value": round(p50_rules, 2),
         "unit": "ms", "target": None, "met": None,
         "note": f"{len(loaded)} rules loaded, none armed; {note}"},
        {"bench": "rules", "metric": "ttfd_p50_no_rules_ms", "value": round(p50_none, 2),
         "unit": "ms", "target": None, "met": None, "note": f"empty rules table; {note}"},
        {"bench": "rules", "metric": "ttfd_ratio", "value": round(ratio, 3), "unit": "x",
         "target": f"<= {TARGET_RATIO}", "met": bool(ratio <= TARGET_RATIO),
         "note": "p50 with seeded rules / p50 without rules (time to the first delta); "
                 f"median of paired ratios {paired:.3f}"},
        {"bench": "rules", "metric": "loader_p50_ms", "value": round(loader_ms, 3),
         "unit": "ms", "target": None, "met": None,
         "note": "the per-tour rules load alone (version check + this chat's repeat records)"},
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
