"""R6.10 through the database: the calibration wave from the first release's seeds (v1) to this
release's (v2). A database seeded with v1 gets v2 on every rule the master left alone; the rules
he edited, disabled or deleted stay exactly as he left them; the wave is logged and recorded in
the seed meta, and running it again changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import delete

from evacore.core import Core
from evacore.logs import configure_logging
from evacore.rules import SEED_META_KEY, SEED_VERSION, SEEDS, Rule, rule_to_json
from evacore.services.rules import run_seeding
from evacore.store import rules as store
from evacore.store.tables import SeedMeta, StreamRule
from tests.helpers import drop_evacore_logging
from tests.rules_integration.test_seeding import _rules, _seeded_long_ago

pytestmark = pytest.mark.both_backends

V1_FILE = Path(__file__).parents[1] / "rules" / "data" / "seeds_v1.json"
V2 = {seed.name: seed for seed in SEEDS}


def v1_seeds() -> tuple[Rule, ...]:
    """The first release's seeds exactly as it shipped them (fields, version 1, seed hash)."""
    out = []
    for data in json.loads(V1_FILE.read_text(encoding="utf-8")):
        fields = {k: v for k, v in data.items() if k not in ("seeded", "mode")}
        fields["when"] = tuple(fields["when"])
        out.append(Rule(**fields))
    return tuple(out)


async def _seed_v1(core: Core) -> None:
    async with core.session() as s:
        await s.execute(delete(StreamRule))
        await s.execute(delete(SeedMeta))
    plan = await run_seeding(core, v1_seeds())
    assert len(plan.create) == 6 and all(r.seed_version == 1 for r in plan.create)
    await _seeded_long_ago(core)


def _fields(rule: dict) -> dict:
    return {k: rule[k] for k in ("scope", "condition", "negate", "when", "text", "mode",
                                 "repeat", "enabled")}


async def test_r6_10_wave_v2_rewrites_untouched_v1_rules_and_spares_the_masters_hand(
    client: httpx.AsyncClient, core: Core, capsys: pytest.CaptureFixture[str]
) -> None:
    await _seed_v1(core)
    v1 = await _rules(client)
    assert {r["seed_version"] for r in v1.values()} == {1}
    assert (await client.patch("/v1/rules/write_diff_over_write_file",
                               json={"repeat": "once", "text": "My words."})).status_code == 200
    assert (await client.patch("/v1/rules/telegram_reply_tail",
                               json={"enabled": False})).status_code == 200
    assert (await client.delete("/v1/rules/local_shell_for_his_machine")).status_code == 204
    touched = await _rules(client)

    configure_logging("json", "INFO")
    try:
        plan = await run_seeding(core)
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()

    after = await _rules(client)
    untouched = ["look_before_refusing", "telegram_markdown_image", "telegram_react_not_emoji"]
    assert sorted(r.name for r in plan.rewrite) == untouched
    for name in untouched:
        seed = rule_to_json(V2[name])
        assert _fields(after[name]) == _fields(seed), name
        assert after[name]["seed_version"] == SEED_VERSION == 2
        assert after[name]["seed_hash"] == V2[name].seed_hash != v1[name]["seed_hash"]
        assert after[name]["created_at"] == v1[name]["created_at"]
    assert after["write_diff_over_write_file"] == touched["write_diff_over_write_file"]
    assert after["telegram_reply_tail"] == touched["telegram_reply_tail"]
    assert "local_shell_for_his_machine" not in after
    assert {left.name: left.reason for left in plan.leave} == {
        "write_diff_over_write_file": "edited", "telegram_reply_tail": "disabled",
        "local_shell_for_his_machine": "deleted"}

    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    [logged] = [x for x in lines if x.get("event") == "stream rules seeded"]
    assert logged["version"] == 2 and sorted(logged["rewritten"]) == untouched
    assert logged["left"] == {"write_diff_over_write_file": "edited",
                              "telegram_reply_tail": "disabled",
                              "local_shell_for_his_machine": "deleted"}
    async with core.session() as s:
        meta = await store.get_seed_meta(s, SEED_META_KEY)
    assert meta is not None and meta["version"] == 2
    assert sorted(meta["waves"][-1]["rewritten"]) == untouched

    again = await run_seeding(core)
    assert not again.changed and not again.rewrite and not again.create
    assert await _rules(client) == after
    async with core.session() as s:
        assert await store.get_seed_meta(s, SEED_META_KEY) == meta


async def test_r6_10_wave_v2_seeded_rules_catch_what_v1_missed(
    client: httpx.AsyncClient, core: Core
) -> None:
    await _seed_v1(core)
    await run_seeding(core)
    cases = [
        ("look_before_refusing", "Я не умею смотреть картинки, опиши её.", ["picture"], True),
        ("look_before_refusing", "На фото я не вижу людей, только пустой пляж.", ["picture"],
         False),
        ("telegram_markdown_image", "Write `![alt](url)` in your README.", ["telegram"], False),
        ("telegram_markdown_image", "Logo: ![logo][1]\n\n[1]: https://example.com/l.png",
         ["telegram"], True),
    ]
    for name, text, env, fires in cases:
        r = await client.post("/v1/rules/test", json={"name": name, "text": text, "env": env})
        assert r.status_code == 200 and r.json()["fires"] is fires, (name, text, r.json())
