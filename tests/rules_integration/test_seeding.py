"""R6.10 through the database: the six rules are seeded once in a database's lifetime, a deleted
one never returns (not on restart, not in a wave), a calibration wave rewrites only untouched
seeded rules, and waves are idempotent — also when two instances start at once."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import delete, update

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.domain.ids import utcnow
from evacore.rules import SEED_META_KEY, SEED_VERSION, SEEDS
from evacore.services.rules import run_seeding
from evacore.store import rules as store
from evacore.store.tables import SeedMeta, StreamRule
from tests.rules_integration.helpers import SEEDED, add_rule

pytestmark = pytest.mark.both_backends

RELEASE_2 = tuple(
    dataclasses.replace(seed, text=seed.text + " (v2)", seed_hash=None,
                        seed_version=SEED_VERSION + 1)
    for seed in SEEDS
)


async def _rules(client: httpx.AsyncClient) -> dict[str, dict]:
    return {r["name"]: r for r in (await client.get("/v1/rules")).json()["rules"]}


async def _seeded_long_ago(core: Core) -> None:
    """Move the seeding an hour back, as if the database had been in use since."""
    past = utcnow() - timedelta(hours=1)
    async with core.session() as s:
        await s.execute(update(StreamRule).where(StreamRule.seed_hash.is_not(None))
                        .values(created_at=past, updated_at=past))
        meta = await store.get_seed_meta(s, SEED_META_KEY)
        assert meta is not None
        for entry in meta["rules"].values():
            entry["at"] = past.isoformat()
        await store.put_seed_meta(s, SEED_META_KEY, meta)


async def test_r6_10_fresh_database_gets_six_seeded_rules_and_waves_are_idempotent(
    client: httpx.AsyncClient, core: Core
) -> None:
    rules = await _rules(client)
    assert sorted(rules) == sorted(SEEDED)
    assert all(r["seeded"] and r["seed_version"] == SEED_VERSION and r["enabled"] for r in rules.values())
    assert (await run_seeding(core)).changed is False
    assert await _rules(client) == rules


async def test_r6_10_wave_rewrites_only_untouched_seeded_rules(
    client: httpx.AsyncClient, core: Core
) -> None:
    await _seeded_long_ago(core)
    before = await _rules(client)
    edited = "telegram_markdown_image"
    r = await client.patch(f"/v1/rules/{edited}", json={"text": "My own wording."})
    assert r.status_code == 200
    assert (await client.patch("/v1/rules/look_before_refusing",
                               json={"enabled": False})).status_code == 200
    assert (await client.delete("/v1/rules/local_shell_for_his_machine")).status_code == 204
    original = before["telegram_react_not_emoji"]["text"]
    for text in ("Changed for a while.", original):  # edited and changed back: still edited
        await client.patch("/v1/rules/telegram_react_not_emoji", json={"text": text})

    plan = await run_seeding(core, RELEASE_2)

    after = await _rules(client)
    assert sorted(r.name for r in plan.rewrite) == ["telegram_reply_tail",
                                                     "write_diff_over_write_file"]
    for name in ("telegram_reply_tail", "write_diff_over_write_file"):
        assert after[name]["text"].endswith("(v2)") and after[name]["seed_version"] == SEED_VERSION + 1
        assert after[name]["created_at"] == before[name]["created_at"]
    assert after[edited]["text"] == "My own wording."
    assert after["look_before_refusing"]["enabled"] is False
    assert not after["look_before_refusing"]["text"].endswith("(v2)")
    assert after["telegram_react_not_emoji"]["text"] == original
    assert "local_shell_for_his_machine" not in after
    reasons = {left.name: left.reason for left in plan.leave}
    assert reasons == {edited: "edited", "look_before_refusing": "disabled",
                       "telegram_react_not_emoji": "edited",
                       "local_shell_for_his_machine": "deleted"}
    assert (await run_seeding(core, RELEASE_2)).changed is False
    assert await _rules(client) == after


async def test_r6_10_deleted_seeded_rule_never_returns_on_restart(
    client: httpx.AsyncClient, core: Core, settings: Settings
) -> None:
    assert (await client.delete("/v1/rules/telegram_reply_tail")).status_code == 204
    restarted = await start_core(settings)
    try:
        async with restarted.session() as s:
            names = {r.name for r in await store.list_rules(s)}
        assert names == set(SEEDED) - {"telegram_reply_tail"}
        await run_seeding(restarted, RELEASE_2)
        async with restarted.session() as s:
            assert "telegram_reply_tail" not in {r.name for r in await store.list_rules(s)}
    finally:
        await restarted.aclose()


async def test_r6_10_own_rule_holding_a_seed_name_is_never_overwritten(
    client: httpx.AsyncClient, core: Core
) -> None:
    assert (await client.delete("/v1/rules/telegram_reply_tail")).status_code == 204
    mine = await add_rule(client, name="telegram_reply_tail", scope="text",
                          condition="SIGN-OFF", negate=True, text="Sign off with SIGN-OFF.")
    plan = await run_seeding(core, RELEASE_2)
    assert (await _rules(client))["telegram_reply_tail"] == mine
    assert "telegram_reply_tail" not in [r.name for r in plan.rewrite]


async def test_r6_10_two_instances_seeding_at_once_write_each_rule_once(
    core: Core, settings: Settings
) -> None:
    async with core.session() as s:
        await s.execute(delete(StreamRule))
        await s.execute(delete(SeedMeta))
    other = await start_core(settings)  # seeds the empty database itself
    try:
        async with core.session() as s:
            await s.execute(delete(StreamRule))
            await s.execute(delete(SeedMeta))
        plans = await asyncio.gather(run_seeding(core), run_seeding(other))
        assert sum(len(p.create) for p in plans) == len(SEEDS)
        async with core.session() as s:
            assert sorted(r.name for r in await store.list_rules(s)) == sorted(SEEDED)
    finally:
        await other.aclose()
