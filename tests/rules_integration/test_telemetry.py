"""R6.11 and R6.4 (bad stored data): a firing writes a log line, a `stream_rule_stat` row (also
for failed tours) and a Prometheus count; /v1/stats lists every current rule and every rule with
records; a rule with an invalid regex written around the API is skipped and tours go on."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.core import Core
from evacore.logs import configure_logging
from evacore.store import rules as store
from evacore.store.tables import Chat, StreamRule
from tests.helpers import drop_evacore_logging
from tests.rules_integration.helpers import SEEDED, add_rule, fired, generate, new_chat

pytestmark = pytest.mark.both_backends

WRITE = {"name": "write_file", "arguments": {"path": "t.txt", "content": "x"}}


def _counter(metrics: str, rule: str, retry: str) -> float:
    for line in metrics.splitlines():
        if (line.startswith("evacore_stream_rule_fired_total{") and f'rule="{rule}"' in line
                and f'retry="{retry}"' in line):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_r6_11_firing_logs_records_counts_and_shows_in_stats(
    client: httpx.AsyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    await add_rule(client, name="t_soft", scope="tool:write_file", text="Soft words.")
    await add_rule(client, name="t_hard", scope="text", condition="BAD", text="Hard words.")
    r = await client.patch("/v1/rules/write_diff_over_write_file", json={"enabled": False})
    assert r.status_code == 200
    chat = await new_chat(client, [
        {"match": "system-interrupt", "step": 0, "text": "fine", "tool_calls": [WRITE]},
        {"step": 1, "text": "done"},
        {"step": 0, "text": "BAD"},
    ])
    metrics_before = (await client.get("/v1/metrics")).text
    configure_logging("json", "INFO")
    try:
        run = await generate(client, chat, "go")
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    soft = [x for x in lines if x.get("event") == "stream rule fired"]
    hard = [x for x in lines if x.get("event") == "stream rule fired on the answer"]
    assert [(x["rule"], x["tool"], x["chat_id"], x["tour_id"]) for x in soft] == [
        ("t_soft", "write_file", chat, run.tour_id)]
    assert [(x["rule"], x["retry"], x["chat_id"], x["tour_id"]) for x in hard] == [
        ("t_hard", True, chat, run.tour_id)]
    # one stat row per firing
    core: Core = client._transport.app.state.core  # type: ignore[attr-defined]
    async with core.session() as s:
        rows = await store.firings_of_tour(s, run.tour_id)
    assert sorted((r["rule"], r["scope"], r["retry"], r["turn"], r["chat_id"]) for r in rows) == [
        ("t_hard", "text", True, 0, chat), ("t_soft", "tool:write_file", False, 0, chat)]
    assert all(r["created_at"] for r in rows)
    # Prometheus
    metrics = (await client.get("/v1/metrics")).text
    root = await client.get("/metrics", headers={"Authorization": ""})
    assert root.status_code == 200 and "evacore_stream_rule_fired_total" in root.text
    assert "# TYPE evacore_stream_rule_fired_total counter" in metrics
    assert _counter(metrics, "t_hard", "true") == _counter(metrics_before, "t_hard", "true") + 1
    assert _counter(metrics, "t_soft", "false") == _counter(metrics_before, "t_soft", "false") + 1
    # stats: every current rule (zeros too); records outlive their rule
    stats = (await client.get("/v1/stats")).json()
    by_rule = {r["rule"]: r for r in stats["rules"]}
    assert set(by_rule) == {*SEEDED, "t_soft", "t_hard"}
    assert by_rule["telegram_reply_tail"] == {"rule": "telegram_reply_tail", "fired": 0,
                                             "retried": 0, "current": True}
    assert (by_rule["t_hard"]["fired"], by_rule["t_hard"]["retried"]) == (1, 1)
    assert stats["tours"] == {"completed": 1}
    assert stats["tokens"]["prompt"] > 0 and stats["tokens"]["completion"] > 0
    assert (await client.delete("/v1/rules/t_hard")).status_code == 204
    after = {r["rule"]: r for r in (await client.get("/v1/stats")).json()["rules"]}
    assert after["t_hard"] == {"rule": "t_hard", "fired": 1, "retried": 1, "current": False}


async def test_r6_11_failed_tour_keeps_its_firing_records(client: httpx.AsyncClient) -> None:
    await add_rule(client, name="t_soft", scope="tool:write_file", text="Soft words.")
    chat = await new_chat(client, [
        {"step": 1, "error": {"status": 400, "message": "upstream refused"}},
        {"step": 0, "text": "writing", "tool_calls": [WRITE]},
    ])
    run = await generate(client, chat, "go")
    assert run.status == "failed"
    assert (await fired(client))["t_soft"] == (1, 0)


async def test_r6_11_aborted_tour_keeps_its_firing_records(
    client: httpx.AsyncClient, core: Core
) -> None:
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour

    chat = await new_chat(client, [{"step": 1, "delay": 30, "text": "never"},
                                   {"step": 0, "text": "writing", "tool_calls": [WRITE]}])
    master = (await client.get("/v1/me")).json()["id"]
    tour = Tour(chat_id=chat, user_id=master, role="master", env=env_for_role("master"),
                input_text="go")
    manager = core.tours
    task = manager.start(tour)
    async for name, _ in tour.events:
        if name == "tool_result":  # the soft rule has fired; the next step waits upstream
            await manager.abort(tour.id)
    await task
    assert tour.status == "aborted"
    async with core.session() as s:
        rows = await store.firings_of_tour(s, tour.id)
    assert [r["rule"] for r in rows] == ["write_diff_over_write_file"]


async def test_r6_4_bad_regex_in_the_database_is_skipped_and_tours_go_on(
    client: httpx.AsyncClient, core: Core, capsys: pytest.CaptureFixture[str]
) -> None:
    async with core.session() as s:  # written around the API
        s.add(StreamRule(name="bad_regex", scope="text", condition="(?=x)", text="t",
                         mode="interrupt"))
        s.add(StreamRule(name="bad_when", scope="text", condition="", text="t",
                         mode="interrupt", when="telegram"))
    await add_rule(client, name="good_one", scope="text", condition="BAD", text="Fix it.")
    chat = await new_chat(client, [
        {"match": "system-interrupt", "step": 0, "text": "corrected"},
        {"step": 0, "text": "BAD answer"},
    ])
    configure_logging("json", "INFO")
    try:
        run = await generate(client, chat, "go")
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()
    assert run.status == "completed" and run.content == "corrected"
    skipped = {s["rule"] for s in run.diagnostics["rules"]["skipped"]}
    assert {"bad_regex"} <= skipped
    assert "bad_regex" not in run.diagnostics["rules"]["loaded"]
    warnings = [json.loads(x) for x in err.splitlines() if '"stream rule skipped"' in x]
    assert {w["rule"] for w in warnings} == {"bad_regex", "bad_when"}
    assert all(w["level"] == "warning" and w["reason"] for w in warnings)
    listed = (await client.get("/v1/rules")).json()["rules"]
    assert "good_one" in [r["name"] for r in listed]
    stats = (await client.get("/v1/stats")).json()
    assert {"bad_regex", "bad_when"} <= {r["rule"] for r in stats["rules"]}


async def test_r6_8_repeat_policies_count_chat_turns_across_tours(
    client: httpx.AsyncClient,
) -> None:
    await add_rule(client, name="r_once", scope="tool:write_file", text="Once.", repeat="once")
    await add_rule(client, name="r_after", scope="tool:write_file", text="Two.",
                   repeat="after:2")
    script = [{"step": 1, "text": "ok"}, {"step": 0, "text": "w", "tool_calls": [WRITE]}]
    chat = await new_chat(client, script)
    seen = []
    for _ in range(3):  # turns 0, 1, 2
        run = await generate(client, chat, "go")
        seen.append(sorted(f["rule"] for f in run.diagnostics["rules"]["fired"]))
    # the seeded write_diff_over_write_file has `after:3`
    assert seen == [["r_after", "r_once", "write_diff_over_write_file"], [], ["r_after"]]
    core: Core = client._transport.app.state.core  # type: ignore[attr-defined]
    async with core.session() as s:  # without the mirror in the chat state: the stat rows
        row = await s.get(Chat, chat)
        assert row is not None and row.state["stream_rules"]["last_fired"] == {
            "r_after": 2, "r_once": 0, "write_diff_over_write_file": 0}
        row.state = {}
    run = await generate(client, chat, "go")  # turn 3
    assert [f["rule"] for f in run.diagnostics["rules"]["fired"]] == [
        "write_diff_over_write_file"]
    other = await new_chat(client, script)  # repeat state is per chat
    run = await generate(client, other, "go")
    assert len(run.diagnostics["rules"]["fired"]) == 3


async def test_r6_11_a_chat_s_first_tour_reads_its_firings_in_a_lean_session(
    client: httpx.AsyncClient, core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat whose engine state holds no repeat state yet (its first tour) has its firings
    read from `stream_rule_stat`, and the tour's repeat state starts from them. On SQLite the
    read runs in a lean session (`store/lean.py`): no ordinary session is opened for it."""
    from evacore.domain.ids import utcnow
    from evacore.domain.roles import env_for_role
    from evacore.pipeline.tour import Tour

    chat = await new_chat(client, [{"step": 0, "text": "fine"}])
    async with core.session() as s:  # fired on turn 3, by a tour before this state was kept
        await store.add_stats(s, [{"rule": "look_before_refusing", "chat_id": chat,
                                   "tour_id": None, "turn": 3, "scope": "text",
                                   "retry": False, "created_at": utcnow()}])

    def tour() -> Tour:
        made = Tour(chat_id=chat, user_id=None, role="master", env=env_for_role("master"))
        made.data["chat"] = {"state": {}, "turn": 5}  # no repeat state kept yet
        return made

    await core.rules.load_for_tour(tour())  # the rule set compiled and fresh
    opened: list[object] = []
    ordinary = core.db.session
    monkeypatch.setattr(core.db, "session", lambda: opened.append(1) or ordinary())
    first = tour()
    rules = await core.rules.load_for_tour(first)
    assert rules is not None
    assert rules.repeat_state.last_fired_turn == {"look_before_refusing": 3}
    assert first.data["chat"]["state"]["stream_rules"] == {
        "last_fired": {"look_before_refusing": 3}}
    assert opened == ([] if core.engine.dialect.name == "sqlite" else [1])
