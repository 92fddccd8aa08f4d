"""R6.4, R6.9, R12.5: `/v1/rules` for the master — exact shapes, every rejected input is a 422
that changes nothing, a taken name is a 409, everyone else gets 403; the probe endpoint."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import make_user
from tests.rules_integration.helpers import SEEDED, add_rule

GOOD: dict[str, Any] = {"name": "shell_needs_timeout", "scope": "tool:shell",
                        "condition": '"timeout":', "negate": True, "repeat": "after:5",
                        "text": "Give long-running shell commands a timeout."}
BAD_CREATES: list[tuple[str, Any]] = [
    ("regex_lookahead", {**GOOD, "condition": "(?=x)", "negate": False}),
    ("regex_unbalanced", {**GOOD, "condition": "a("}),
    ("regex_backreference", {**GOOD, "condition": r"(a)\1"}),
    ("text_empty", {**GOOD, "text": ""}),
    ("text_blank", {**GOOD, "text": "   \n"}),
    ("text_401", {**GOOD, "text": "x" * 401}),
    ("scope_bare_tool", {**GOOD, "scope": "tool:"}),
    ("scope_unknown", {**GOOD, "scope": "thinking"}),
    ("scope_upper", {**GOOD, "scope": "TEXT"}),
    ("scope_space", {**GOOD, "scope": "tool:a b"}),
    ("mode_remind_on_text", {**GOOD, "scope": "text", "mode": "remind"}),
    ("mode_interrupt_on_tool", {**GOOD, "mode": "interrupt"}),
    ("mode_unknown", {**GOOD, "mode": "shout"}),
    ("when_unknown", {**GOOD, "when": ["telegram", "discord"]}),
    ("when_string", {**GOOD, "when": "telegram"}),
    ("repeat_zero", {**GOOD, "repeat": "after:0"}),
    ("repeat_leading_zero", {**GOOD, "repeat": "after:01"}),
    ("repeat_upper", {**GOOD, "repeat": "ONCE"}),
    ("repeat_word", {**GOOD, "repeat": "often"}),
    ("name_dash", {**GOOD, "name": "bad-name"}),
    ("name_upper", {**GOOD, "name": "Bad"}),
    ("name_cyrillic", {**GOOD, "name": "имя"}),
    ("name_empty", {**GOOD, "name": ""}),
    ("name_65", {**GOOD, "name": "a" * 65}),
    ("unknown_field", {**GOOD, "colour": "red"}),
    ("negate_string", {**GOOD, "negate": "yes"}),
    ("text_number", {**GOOD, "text": 5}),
    ("negated_empty_condition", {**GOOD, "condition": ""}),
    ("missing_text", {k: v for k, v in GOOD.items() if k != "text"}),
    ("missing_scope", {k: v for k, v in GOOD.items() if k != "scope"}),
    ("not_an_object", [GOOD]),
    ("a_string", "rule"),
]


async def _snapshot(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    r = await client.get("/v1/rules")
    assert r.status_code == 200
    return r.json()["rules"]


async def test_r12_5_create_list_edit_delete_shapes(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/rules", json=GOOD)
    assert r.status_code == 201, r.text
    rule = r.json()
    assert rule == {**GOOD, "when": [], "mode": "remind", "enabled": True, "seeded": False,
                    "seed_version": None, "seed_hash": None,
                    "created_at": rule["created_at"], "updated_at": rule["updated_at"]}
    listed = await _snapshot(client)
    assert [x["name"] for x in listed] == sorted([*SEEDED, GOOD["name"]])
    assert next(x for x in listed if x["name"] == GOOD["name"]) == rule
    r = await client.patch(f"/v1/rules/{GOOD['name']}", json={"text": "Set a timeout."})
    assert r.status_code == 200 and r.json()["text"] == "Set a timeout."
    assert r.json()["updated_at"] > rule["updated_at"]
    again = await client.patch(f"/v1/rules/{GOOD['name']}", json={"text": "Set a timeout."})
    assert again.json()["updated_at"] == r.json()["updated_at"]  # nothing changed, no write
    assert (await client.get(f"/v1/rules/{GOOD['name']}")).json() == r.json()
    r = await client.delete(f"/v1/rules/{GOOD['name']}")
    assert r.status_code == 204 and r.content == b""
    assert GOOD["name"] not in [x["name"] for x in await _snapshot(client)]
    assert (await client.delete(f"/v1/rules/{GOOD['name']}")).status_code == 404
    assert (await client.patch(f"/v1/rules/{GOOD['name']}", json={"text": "x"})).status_code \
        == 404


async def test_r6_4_invalid_create_is_422_and_changes_nothing(client: httpx.AsyncClient) -> None:
    before = await _snapshot(client)
    for case, body in BAD_CREATES:
        r = await client.post("/v1/rules", json=body)
        assert r.status_code == 422, (case, r.text)
        error = r.json()["error"]
        assert error["code"] == "rule_invalid" and error["message"].strip(), case
    r = await client.post("/v1/rules", content=b"{not json",
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "rule_invalid"
    r = await client.post("/v1/rules", json={**GOOD, "condition": "(?=x)", "repeat": "often",
                                             "negate": False})
    message = r.json()["error"]["message"]  # every problem named in one message
    assert "lookaround" in message and "repeat" in message
    assert await _snapshot(client) == before


BAD_PATCHES: list[dict[str, Any]] = [
    {"text": ""}, {"text": "y" * 401}, {"condition": "(?<=x)"}, {"name": "renamed"},
    {"scope": None}, {"scope": "text", "mode": "remind"}, {"negate": "no"},
    {"when": ["moon"]}, {"repeat": "after:-1"}, {"condition": "", "negate": True},
    {"enabled": None}, {"bogus": 1},
]


async def test_r6_4_invalid_edit_is_422_and_changes_nothing_duplicate_is_409(
    client: httpx.AsyncClient,
) -> None:
    await add_rule(client, **GOOD)
    before = await _snapshot(client)
    for patch in BAD_PATCHES:
        r = await client.patch(f"/v1/rules/{GOOD['name']}", json=patch)
        assert r.status_code == 422, (patch, r.text)
        assert r.json()["error"]["code"] == "rule_invalid"
    r = await client.post("/v1/rules", json={**GOOD, "name": "telegram_reply_tail"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    r = await client.post("/v1/rules", json=GOOD)
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert await _snapshot(client) == before


async def test_r12_5_non_master_gets_403_everywhere(client: httpx.AsyncClient) -> None:
    before = await _snapshot(client)
    for role in ("trusted", "guest"):
        await _refused_everywhere(client, await make_user(client, role))
    assert await _snapshot(client) == before
    anonymous = await client.get("/v1/rules", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def _refused_everywhere(client: httpx.AsyncClient, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    calls = [
        ("GET", "/v1/rules", None), ("POST", "/v1/rules", GOOD),
        ("GET", "/v1/rules/telegram_reply_tail", None),
        ("PATCH", "/v1/rules/telegram_reply_tail", {"enabled": False}),
        ("DELETE", "/v1/rules/telegram_reply_tail", None),
        ("POST", "/v1/rules/test", {"name": "telegram_reply_tail", "text": "hi"}),
        ("GET", "/v1/stats", None),
    ]
    for method, url, body in calls:
        r = await client.request(method, url, json=body, headers=headers)
        assert r.status_code == 403, (method, url, r.text)
        assert r.json()["error"]["code"] == "forbidden"


async def test_r6_9_probe_endpoint_answers_would_it_fire(client: httpx.AsyncClient) -> None:
    async def probe(**body: Any) -> dict[str, Any]:
        r = await client.post("/v1/rules/test", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    missing = await probe(name="telegram_reply_tail", text="See you at ten.", env=["telegram"])
    assert missing["fires"] is True and "negated" in missing["reason"]
    tailed = await probe(name="telegram_reply_tail", text="See you at ten. ↩ #12",
                         env={"telegram": True})
    assert tailed["fires"] is False
    elsewhere = await probe(name="telegram_reply_tail", text="See you.", env=[])
    assert elsewhere["fires"] is False and "telegram" in elsewhere["reason"]
    unsaved = await probe(rule={"name": "env_file", "scope": "tool:read_file",
                                "condition": r'"path":"[^"]*\.env"', "text": "Secrets!"},
                          arguments={"path": "conf/.env"})
    assert unsaved == {"rule": "env_file", "fires": True, "reason": "the condition is found",
                       "target": '{"path":"conf/.env"}'}
    assert (await client.get("/v1/rules/env_file")).status_code == 404  # probing saves nothing
    for bad in ({"rule": {"name": "x", "scope": "text", "text": "t", "condition": "(?=a)"},
                 "text": "a"}, {"text": "a"}, {"name": "telegram_reply_tail", "rule": GOOD},
                {"name": "telegram_reply_tail", "text": 3}, {"name": 1}, {"surprise": True}):
        r = await client.post("/v1/rules/test", json=bad)
        assert r.status_code == 422, (bad, r.text)
    assert (await client.post("/v1/rules/test", json={"name": "nope", "text": "a"})).status_code \
        == 404
