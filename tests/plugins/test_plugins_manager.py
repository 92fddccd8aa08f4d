"""The plugin manager: the master's PATCH, persisted state, plugin macros and tools (R3.4, R8.2)."""

from __future__ import annotations

from typing import Any

import pytest

from evacore.errors import InvalidInput, NotFound, ToolError
from tests.plugins.conftest import Loader, tour
from tests.plugins.test_plugins_loading import GOOD

FAULTY = """
    import asyncio
    from evacore.plugins import Plugin
    plugin = Plugin(name="faulty", version="1")

    @plugin.macro("explode")
    def explode(env, *args):
        raise ValueError("macro bug")

    @plugin.tool(name="hang", description="Never answers", timeout=0.05)
    async def hang(args, ctx):
        await asyncio.sleep(10)

    @plugin.tool(name="echo", description="Echo the args")
    async def echo(args, ctx):
        return {"args": args, "tour": ctx.tour_id}
"""


def test_r8_2_update_validates_name_permissions_and_settings(load_plugins: Loader) -> None:
    changes: list[tuple[str, dict[str, Any]]] = []
    manager = load_plugins({"good.py": GOOD}, grant_declared=False,
                           on_change=lambda name, state: changes.append((name, state)))
    with pytest.raises(NotFound):
        manager.update("nope", enabled=True)
    with pytest.raises(InvalidInput, match="unknown permission 'root'"):
        manager.update("good", permissions=["prompt:read", "root"])
    with pytest.raises(InvalidInput, match="greeting"):
        manager.update("good", settings={"greeting": ["not", "a", "string"]})
    assert manager.describe("good")["permissions"] == [] and changes == []
    entry = manager.update("good", enabled=True, permissions=["prompt:read", "response:write"],
                           settings={"greeting": " bye"})
    assert entry["permissions"] == ["prompt:read", "response:write"]
    assert entry["settings"] == {"greeting": " bye"}
    assert entry["missing_permissions"] == ["macros", "tools"]
    assert entry["state"] == "waiting_permission"
    assert changes[-1] == ("good", {"enabled": True, "permissions": ["prompt:read", "response:write"],
                                    "settings": {"greeting": " bye"}, "failures": 0, "last_error": None})


def test_r8_2_list_shows_what_the_api_needs(load_plugins: Loader) -> None:
    manager = load_plugins({"good.py": GOOD, "broken.py": "raise ImportError('x')"})
    by = {p["name"]: p for p in manager.list()}
    good = by["good"]
    for key in ("name", "version", "enabled", "state", "capabilities", "permissions", "failures",
                "last_error", "hooks", "settings", "settings_schema", "broken", "origin"):
        assert key in good
    assert good["state"] == "active" and good["broken"] is None
    assert good["settings"] == {"greeting": "hi"}
    assert by["broken"]["state"] == "broken" and "ImportError: x" in by["broken"]["broken"]


def test_r7_state_round_trips_through_the_hosts_storage(load_plugins: Loader) -> None:
    manager = load_plugins({"good.py": GOOD})
    manager.update("good", enabled=False, settings={"greeting": "hey"})
    snapshot = manager.state_snapshot()
    fresh = load_plugins({"good.py": GOOD}, grant_declared=False)
    warnings = fresh.load_state(snapshot | {"gone": {"enabled": True, "permissions": ["tools"]}})
    assert warnings == []
    assert fresh.describe("good")["enabled"] is False
    assert fresh.describe("good")["settings"] == {"greeting": "hey"}
    assert fresh.state_snapshot()["gone"] == {"enabled": True, "permissions": ["tools"]}
    bad = fresh.load_state({"good": {"enabled": True, "permissions": ["prompt:read", "teleport"], "settings": {"greeting": 5}}})
    assert any("teleport" in w for w in bad) and any("settings invalid" in w for w in bad)
    assert fresh.describe("good")["state"] == "settings_invalid"


async def test_r3_settings_reach_the_hook_as_the_validated_model(load_plugins: Loader) -> None:
    manager = load_plugins({"good.py": GOOD})
    manager.update("good", settings={"greeting": " -- hi from settings"})
    text, _ = await manager.dispatcher.run_postprocess("answer", ctx_base=tour())
    assert text == "answer -- hi from settings"


async def test_r5_2_plugin_tools_and_macros_run_under_the_contract(load_plugins: Loader) -> None:
    failures: list[tuple[str, str, str]] = []
    manager = load_plugins({"faulty.py": FAULTY, "good.py": GOOD},
                           on_failure=lambda *a: failures.append(a))
    macros = manager.dispatcher.macro_functions()
    assert macros["shout"](None, "hey") == "HEY"
    assert macros["explode"](None, "a", "b") == "{{explode::a::b}}"
    assert set(manager.tools()) == {"hang", "echo", "add"}
    assert await manager.dispatcher.run_tool("add", {"a": 2, "b": 3}, ctx_base=tour()) == "5"
    assert await manager.dispatcher.run_tool("echo", {"x": 1}, ctx_base=tour()) == \
        '{"args": {"x": 1}, "tour": "tour-1"}'
    with pytest.raises(ToolError, match="timeout after 0.05s"):
        await manager.dispatcher.run_tool("hang", {}, ctx_base=tour())
    assert failures == [("faulty", "macro:explode", "error"), ("faulty", "hang", "timeout")]
    manager.update("faulty", permissions=[])
    assert "echo" not in manager.tools() and "explode" not in manager.dispatcher.macro_functions()
    with pytest.raises(ToolError, match="no plugin tool 'echo'"):
        await manager.dispatcher.run_tool("echo", {}, ctx_base=tour())


def test_r3_builtin_plugins_start_with_their_declared_permissions() -> None:
    from evacore.plugins import PluginManager, discover

    manager = PluginManager(discover(None, entry_points=False))
    entry = manager.describe("regex_scripts")
    assert entry["builtin"] and entry["enabled"] and entry["state"] == "active"
    assert entry["permissions"] == ["prompt:write", "response:write"]
