"""R3, R2.15: real plugin files run in a tour; the change log shows per-hook changes; the budget
is re-applied after interceptors; permissions are granted over the API."""

from __future__ import annotations

import contextlib
import textwrap

import httpx
import pytest

from evacore.config import Settings
from evacore.core import start_core
from tests.conftest import wipe

PLUGIN_A = '''
from evacore.plugins import Plugin
plugin = Plugin(name="shouter", version="1.0")

@plugin.interceptor(priority=10, capabilities=["prompt:write"])
async def add_note(ctx):
    ctx.messages.insert(0, {"id": "shout", "role": "system", "content": "SPEAK LOUDLY"})

@plugin.postprocess(priority=10, capabilities=["response:write"])
async def upper(ctx):
    ctx.text = ctx.text.upper()
'''

PLUGIN_B = '''
from evacore.plugins import Plugin
plugin = Plugin(name="padder", version="1.0")

@plugin.interceptor(priority=20, capabilities=["prompt:write"])
async def inflate(ctx):
    for m in ctx.messages:
        if m["id"].startswith("history:") and not m["protected"]:
            m["content"] = m["content"] + (" padding" * 400)
'''

PLUGIN_C = '''
from evacore.plugins import Plugin
plugin = Plugin(name="reader", version="1.0")

@plugin.interceptor(priority=30, capabilities=["prompt:read"])
async def sneaky(ctx):
    ctx.messages[0]["content"] = "changed by a read-only hook"
'''


@pytest.fixture
async def plugin_client(settings: Settings):
    async with _client_with(settings, {"shouter.py": PLUGIN_A, "padder.py": PLUGIN_B,
                                       "reader.py": PLUGIN_C}) as c:
        yield c


@contextlib.asynccontextmanager
async def _client_with(settings: Settings, files: dict[str, str]):
    """An API client of a fresh core whose plugins directory holds `files` (name → source)."""
    from evacore.server.app import create_app
    from tests.conftest import MASTER_TOKEN

    plugins = settings.data_dir / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        (plugins / name).write_text(textwrap.dedent(source))
    await wipe(settings.db_url)
    core = await start_core(settings)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core=core)),
                                     base_url="http://t", timeout=30,
                                     headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:
            yield c
    finally:
        await core.aclose()


async def test_r3_4_plugins_wait_for_permission_then_run_and_log(plugin_client) -> None:
    c = plugin_client
    listed = {p["name"]: p for p in (await c.get("/v1/plugins")).json()["plugins"]}
    assert {"shouter", "padder", "reader", "regex_scripts"} <= set(listed)
    assert listed["shouter"]["permissions"] == []
    chat = (await c.post("/v1/chats", json={})).json()
    r = await c.post(f"/v1/chats/{chat['id']}/generate",
                     json={"message": {"content": "hello"}, "stream": False})
    tour = (await c.get(f"/v1/tours/{r.json()['tour_id']}")).json()
    skipped = [p for p in tour["diagnostics"]["plugins"] if p["outcome"] == "skipped"]
    assert any("permission not granted" in (p.get("reason") or "") for p in skipped)
    assert r.json()["content"] != r.json()["content"].upper()

    for name, perms in (("shouter", ["prompt:write", "response:write"]),
                        ("reader", ["prompt:read"])):
        p = await c.patch(f"/v1/plugins/{name}", json={"enabled": True, "permissions": perms})
        assert p.status_code == 200, p.text
    bad = await c.patch("/v1/plugins/shouter", json={"permissions": ["root"]})
    assert bad.status_code == 422
    r = await c.post(f"/v1/chats/{chat['id']}/generate",
                     json={"message": {"content": "again"}, "stream": False})
    body = r.json()
    assert body["content"] == body["content"].upper()
    tour = (await c.get(f"/v1/tours/{body['tour_id']}")).json()
    d = tour["diagnostics"]
    records = {(p["plugin"], p["outcome"]) for p in d["plugins"]}
    assert ("shouter", "applied") in records and ("reader", "rejected") in records
    applied = next(p for p in d["plugins"] if p["plugin"] == "shouter" and p["stage"] ==
                   "interceptors")
    assert "shout" in str(applied["changes"])
    sent = d["requests"][0]["body"]["messages"]
    assert sent[0]["content"] == "SPEAK LOUDLY"
    assert all(m["content"] != "changed by a read-only hook" for m in sent)
    ours = [h for h in d["plugin_order"]["interceptor"] if not h.startswith("regex_scripts")]
    assert ours == ["shouter.add_note", "padder.inflate", "reader.sneaky"]
    saved = (await c.get(f"/v1/chats/{chat['id']}/messages")).json()["messages"][-1]
    assert saved["content"] == body["content"]


async def test_r2_1_stage8_budget_reapplied_after_an_inflating_interceptor(plugin_client) -> None:
    c = plugin_client
    conn = (await c.post("/v1/connections", json={
        "name": "small", "kind": "mock", "context_size": 1200, "max_tokens": 200})).json()
    chat = (await c.post("/v1/chats", json={"connection_id": conn["id"]})).json()
    for i in range(6):
        await c.post(f"/v1/chats/{chat['id']}/messages",
                     json={"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"message {i}"})
    await c.patch("/v1/plugins/padder", json={"permissions": ["prompt:write"]})
    r = await c.post(f"/v1/chats/{chat['id']}/generate",
                     json={"message": {"content": "and now?"}, "stream": False})
    assert r.status_code == 200, r.text
    d = (await c.get(f"/v1/tours/{r.json()['tour_id']}")).json()["diagnostics"]
    removed = d["shift"].get("removed_after_interceptors")
    assert removed, "the inflated history should have been cut back"
    sent = d["requests"][0]["body"]["messages"]
    assert sent[-1]["content"] == "and now?"
    total_chars = sum(len(str(m["content"])) for m in sent)
    assert total_chars / 3.35 < 1000


EDITOR = '''
from evacore.plugins import Plugin
plugin = Plugin(name="editor", version="1.0")

@plugin.interceptor(priority=10, capabilities=["prompt:write"])
async def edit(ctx):
    # the current input is last (no empty post-history element after it)
    assert ctx.messages[-1]["kind"] == "input", ctx.messages[-1]
    main = next(m for m in ctx.messages if m["id"] == "main")
    assert main["protected"] and ctx.may_edit(main)
    main["content"] = main["content"] + " Answer in French."
    if "{{remove}}" in ctx.messages[-1]["content"]:
        ctx.messages.remove(main)
'''

BIG = '''
from evacore.plugins import Plugin
plugin = Plugin(name="big", version="1.0")

@plugin.interceptor(priority=10, capabilities=["prompt:write"])
async def insert(ctx):
    at = next(i for i, m in enumerate(ctx.messages) if m["kind"] == "input")
    ctx.messages.insert(at, {"id": "keep", "role": "system", "content": "KEEP " * 300,
                             "priority": 5})
    ctx.messages.insert(at, {"id": "drop", "role": "system", "content": "DROP " * 600,
                             "priority": 1})
'''

SHOUT = '''
from evacore.plugins import Plugin
plugin = Plugin(name="loud", version="1.0")

@plugin.macro("shout")
def shout(env, text=""):
    return text.upper()
'''


PLUGIN_BOOM = '''
from evacore.plugins import Plugin
plugin = Plugin(name="boomer", version="1.0")

@plugin.interceptor(priority=5, capabilities=["prompt:write"])
async def explode(ctx):
    raise RuntimeError("boomer broke")
'''


def _failures_metric(text: str, plugin: str) -> float:
    """evacore_plugin_failures_total summed over one plugin's label sets."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("evacore_plugin_failures_total{") and f'plugin="{plugin}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
async def plugins_client(settings: Settings, request: pytest.FixtureRequest):
    """A core whose plugins directory holds the files of the test's `plugin_files` mark."""
    async with _client_with(settings, request.node.get_closest_marker("plugin_files").args[0]
                            ) as c:
        yield c


async def _generate(c: httpx.AsyncClient, chat_id: str, text: str) -> dict:
    r = await c.post(f"/v1/chats/{chat_id}/generate",
                     json={"message": {"content": text}, "stream": False})
    assert r.status_code == 200, r.text
    return (await c.get(f"/v1/tours/{r.json()['tour_id']}")).json()["diagnostics"]


@pytest.mark.plugin_files({"editor.py": EDITOR})
async def test_r3_4_an_interceptor_edits_protected_content_but_cannot_remove_it(
        plugins_client) -> None:
    c = plugins_client
    await c.patch("/v1/plugins/editor", json={"enabled": True, "permissions": ["prompt:write"]})
    chat = (await c.post("/v1/chats", json={})).json()
    d = await _generate(c, chat["id"], "hello")
    sent = d["requests"][0]["body"]["messages"]
    assert sent[0]["content"].endswith(" Answer in French.") and sent[-1]["content"] == "hello"
    record = next(r for r in d["changes"] if r["actor"] == "plugin:editor.edit")
    assert record["outcome"] == "applied" and record["stage"] == "plugin_interceptors"
    assert [ch["id"] for ch in record["changed"]] == ["main"]
    # removing it is refused with all of that hook's changes
    d = await _generate(c, chat["id"], "now {{remove}}")
    record = next(r for r in d["changes"] if r["actor"] == "plugin:editor.edit")
    assert record["outcome"] == "rejected" and "removed protected element 'main'" in record["reason"]
    assert not d["requests"][0]["body"]["messages"][0]["content"].endswith("French.")


@pytest.mark.plugin_files({"big.py": BIG})
async def test_r3_plugin_elements_are_cut_to_fit_lowest_priority_first_and_logged(
        plugins_client) -> None:
    c = plugins_client
    await c.patch("/v1/plugins/big", json={"enabled": True, "permissions": ["prompt:write"]})
    conn = (await c.post("/v1/connections", json={
        "name": "small", "kind": "mock", "context_size": 1000, "max_tokens": 200})).json()
    chat = (await c.post("/v1/chats", json={"connection_id": conn["id"]})).json()
    d = await _generate(c, chat["id"], "and now?")  # no context_overflow
    sent = [m["content"] for m in d["requests"][0]["body"]["messages"]]
    assert sent[-2:] == ["KEEP " * 300, "and now?"]
    assert not any(s.startswith("DROP") for s in sent)
    budget = next(r for r in d["changes"] if r["actor"] == "stage:budget")
    assert budget["stage"] == "plugin_interceptors"
    assert [(r["id"], r["kind"]) for r in budget["removed"]] == [("drop", "plugin")]


@pytest.mark.plugin_files({"loud.py": SHOUT})
async def test_r3_plugin_macros_follow_the_plugin_state_live(plugins_client) -> None:
    c = plugins_client
    chat = (await c.post("/v1/chats", json={})).json()

    async def said() -> str:
        d = await _generate(c, chat["id"], "{{shout::quiet please}}")
        return d["requests"][0]["body"]["messages"][-1]["content"]

    assert await said() == "{{shout::quiet please}}"  # waiting for its grant
    r = await c.patch("/v1/plugins/loud", json={"enabled": True, "permissions": ["macros"]})
    assert r.status_code == 200, r.text
    assert await said() == "QUIET PLEASE"  # no restart needed
    await c.patch("/v1/plugins/loud", json={"enabled": False})
    assert await said() == "{{shout::quiet please}}"


@pytest.mark.plugin_files({"boomer.py": PLUGIN_BOOM})
async def test_r8_6_plugin_failures_are_counted_in_stats_and_metrics(plugins_client) -> None:
    """A hook that raises in real tours shows in `GET /v1/stats` (`plugins.failures`, per plugin
    with its last error) and in the Prometheus counter, one count per failing call."""
    c = plugins_client
    before = (await c.get("/v1/stats")).json()
    assert before["plugins"]["failures"] == 0
    assert before["plugins"]["by_plugin"]["boomer"]["failures"] == 0
    metric_before = _failures_metric((await c.get("/metrics")).text, "boomer")

    granted = await c.patch("/v1/plugins/boomer", json={"permissions": ["prompt:write"]})
    assert granted.status_code == 200, granted.text
    chat = (await c.post("/v1/chats", json={})).json()
    for text in ("one", "two"):
        r = await c.post(f"/v1/chats/{chat['id']}/generate",
                         json={"message": {"content": text}, "stream": False})
        assert r.status_code == 200, r.text  # a failing hook never fails the tour

    stats = (await c.get("/v1/stats")).json()["plugins"]
    assert stats["by_plugin"]["boomer"]["failures"] == 2
    assert "boomer broke" in stats["by_plugin"]["boomer"]["last_error"]
    assert stats["failures"] == 2  # no other plugin failed
    assert _failures_metric((await c.get("/metrics")).text, "boomer") - metric_before == 2
