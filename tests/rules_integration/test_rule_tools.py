"""R6.9: the model manages rules with `stream_rule_*` tools in master tours only, with the same
validation as the API (a rejected input is an `error: …` result and the tour goes on); a rule
changed on one instance is seen by the next tour on another."""

from __future__ import annotations

import asyncio
import json

import httpx

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.services import rules as service
from tests.conftest import make_user
from tests.rules_integration.helpers import generate, messages, new_chat

RULE_TOOLS = ["stream_rule_list", "stream_rule_create", "stream_rule_edit", "stream_rule_delete"]
CREATE = {"name": "stream_rule_create", "arguments": {
    "name": "from_model", "scope": "text", "condition": "oops", "text": "Do not say oops."}}


async def test_r6_9_model_creates_edits_lists_deletes_rules_in_a_master_tour(
    client: httpx.AsyncClient,
) -> None:
    chat = await new_chat(client, [
        {"step": 0, "tool_calls": [CREATE, {"name": "stream_rule_create", "arguments": {
            "name": "Bad Name", "scope": "tool:", "text": ""}}]},
        {"step": 1, "tool_calls": [
            {"name": "stream_rule_edit", "arguments": {"name": "from_model",
                                                       "text": "Never say oops."}},
            {"name": "stream_rule_list", "arguments": {}}]},
        {"step": 2, "tool_calls": [
            {"name": "stream_rule_delete", "arguments": {"name": "telegram_react_not_emoji"}},
            {"name": "stream_rule_delete", "arguments": {"name": "no_such_rule"}}]},
        {"step": 3, "text": "rules updated"},
    ])
    run = await generate(client, chat, "remember not to say oops")
    assert run.content == "rules updated"
    assert set(RULE_TOOLS) <= set(run.diagnostics["tools_offered"])
    steps = (await messages(client, chat))[-1]["variants"][0]["steps"]
    results = [[r["content"] for r in step["results"]] for step in steps]
    created, refused = results[0]
    assert created.startswith("created ") and json.loads(created[8:])["name"] == "from_model"
    assert refused.startswith("error: invalid rule: ")
    assert "name:" in refused and "scope:" in refused and "text:" in refused
    edited, listed = results[1]
    assert json.loads(edited[6:])["text"] == "Never say oops."
    by_name = {r["name"]: r for r in json.loads(listed)}
    assert by_name["from_model"]["text"] == "Never say oops." and by_name["from_model"]["seeded"] \
        is False
    assert results[2][0] == "deleted telegram_react_not_emoji"
    assert results[2][1].startswith("error: ") and "no_such_rule" in results[2][1]
    rules = {r["name"]: r for r in (await client.get("/v1/rules")).json()["rules"]}
    assert rules["from_model"]["text"] == "Never say oops."
    assert "telegram_react_not_emoji" not in rules and "bad_name" not in rules


async def test_r6_9_rule_tools_are_not_offered_to_trusted_or_guest(
    client: httpx.AsyncClient,
) -> None:
    for role in ("trusted", "guest"):
        token = await make_user(client, role, name=f"{role} user")
        headers = {"Authorization": f"Bearer {token}"}
        chat = await new_chat(client, [{"step": 1, "text": "ok"},
                                       {"step": 0, "tool_calls": [CREATE]}],
                              Authorization=headers["Authorization"])
        run = await generate(client, chat, "make a rule", headers=headers)
        assert not set(RULE_TOOLS) & set(run.diagnostics["tools_offered"]), role
        result = run.of("tool_result")[0]["content"]
        assert result.startswith("error: unknown tool 'stream_rule_create'"), role
    assert "from_model" not in [r["name"] for r in (await client.get("/v1/rules")).json()["rules"]]


async def test_r6_1_rule_changed_on_another_instance_applies_to_a_later_tour(
    client: httpx.AsyncClient, core: Core, settings: Settings
) -> None:
    rules = core.rules
    async with core.session() as s:
        first = await rules.ruleset(s)
        assert await rules.ruleset(s) is first  # unchanged rules: the compiled set is reused
    rules.fresh_seconds = 0.2  # how long a cached rule set is trusted without a version check
    other = await start_core(settings)
    try:
        async with other.session() as s:
            await service.create_rule(s, {"name": "elsewhere", "scope": "text",
                                          "condition": "NOPE", "text": "No NOPE."})
    finally:
        await other.aclose()
    await asyncio.sleep(0.25)
    chat = await new_chat(client, [{"match": "system-interrupt", "step": 0, "text": "yes"},
                                   {"step": 0, "text": "NOPE"}])
    run = await generate(client, chat, "hi")
    assert run.content == "yes"
    assert [d["rule"] for d in run.diagnostics["discarded"]] == ["elsewhere"]
    assert rules._ruleset is not first


async def test_r6_1_rule_changed_here_applies_to_the_very_next_tour(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat = await new_chat(client, [{"match": "system-interrupt", "step": 0, "text": "fixed"},
                                   {"step": 0, "text": "TODAY is fine"}])
    assert (await generate(client, chat, "one")).content == "TODAY is fine"  # caches the set
    r = await client.post("/v1/rules", json={"name": "no_today", "scope": "text",
                                             "condition": "TODAY", "text": "Not today."})
    assert r.status_code == 201
    assert (await generate(client, chat, "two")).content == "fixed"
    r = await client.patch("/v1/rules/no_today", json={"enabled": False})
    assert r.status_code == 200
    assert (await generate(client, chat, "three")).content == "TODAY is fine"
