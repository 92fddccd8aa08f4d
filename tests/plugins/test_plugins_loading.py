"""Discovery and manifests (R3, R12.6): bad plugins become broken entries, the host goes on."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from evacore.plugins import BrokenPlugin, LoadedPlugin, Plugin, PluginDefinitionError, discover
from tests.plugins.conftest import Loader, write_plugins

GOOD = """
    from pydantic import BaseModel
    from evacore.plugins import Plugin

    class Settings(BaseModel):
        greeting: str = "hi"

    plugin = Plugin(name="good", version="1.2.3", settings=Settings, description="says hi")

    @plugin.interceptor(priority=20, capabilities=["prompt:read"], timeout=1.5)
    async def look(ctx):
        pass

    @plugin.postprocess
    async def sign(ctx):
        ctx.text += ctx.settings.greeting

    @plugin.macro("shout")
    def shout(env, text=""):
        return text.upper()

    @plugin.tool(name="add", description="Add two numbers",
                 parameters={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
    async def add(args, ctx):
        return str(args["a"] + args["b"])
"""


def test_r12_6_manifest_lists_hooks_settings_and_registrations(tmp_path: Path) -> None:
    found = discover(write_plugins(tmp_path, {"good.py": GOOD}), entry_points=False, builtins=False)
    assert len(found) == 1 and isinstance(found[0], LoadedPlugin)
    manifest = found[0].plugin.manifest()
    assert manifest["name"] == "good" and manifest["version"] == "1.2.3"
    assert manifest["hooks"] == [
        {"name": "look", "stage": "interceptor", "priority": 20, "capabilities": ["prompt:read"], "timeout": 1.5},
        {"name": "sign", "stage": "postprocess", "priority": 100, "capabilities": ["response:write"],
         "timeout": 2.0},
    ]
    assert manifest["capabilities"] == ["macros", "prompt:read", "response:write", "tools"]
    assert manifest["macros"] == ["shout"]
    assert manifest["tools"][0]["name"] == "add"
    assert manifest["settings_schema"]["properties"]["greeting"]["default"] == "hi"


@pytest.mark.parametrize("source, message", [
    ("@plugin.interceptor(capabilities=['prompt:write', 'root'])\nasync def h(ctx): pass",
     "unknown capability 'root'"),
    ("@plugin.interceptor\ndef h(ctx): pass", "must be an `async def` function"),
    ("@plugin.interceptor(timeout=0)\nasync def h(ctx): pass", "timeout must be > 0"),
    ("@plugin.interceptor(timeout=-1)\nasync def h(ctx): pass", "timeout must be > 0"),
    ("@plugin.interceptor(capabilities=['network'])\nasync def h(ctx): pass",
     "declare 'prompt:read' or 'prompt:write'"),
    ("@plugin.stream(capabilities='response:read')\nasync def h(ctx): pass", "must be a list"),
    ("@plugin.postprocess(priority='high')\nasync def h(ctx): pass", "priority must be an integer"),
    ("@plugin.interceptor\nasync def h(ctx): pass\n@plugin.interceptor\nasync def h(ctx): pass",
     "already declared"),
    ("@plugin.macro('m')\nasync def m(env): return ''", "plain (not async)"),
])
def test_r3_invalid_definitions_mark_the_plugin_broken_at_load(tmp_path: Path, source: str, message: str) -> None:
    files = {
        "bad.py": "from evacore.plugins import Plugin\nplugin = Plugin(name='bad', version='1')\n" + source,
        "good.py": GOOD,
    }
    found = {f.name: f for f in discover(write_plugins(tmp_path, files), entry_points=False, builtins=False)}
    assert isinstance(found["good"], LoadedPlugin)
    bad = found["bad"]
    assert isinstance(bad, BrokenPlugin) and message in bad.error
    assert "PluginDefinitionError" in bad.error


def test_r3_5_modules_that_fail_to_import_are_broken_not_fatal(tmp_path: Path) -> None:
    files = {
        "a_syntax.py": "def broken(:\n",
        "b_raises.py": "raise RuntimeError('no config')\n",
        "c_exits.py": "import sys\nsys.exit(2)\n",
        "d_no_plugin.py": "x = 1\n",
        "e_missing_dep.py": "import a_package_that_is_not_installed\n",
        "f_good.py": GOOD,
        "_private.py": "raise RuntimeError('never imported')\n",
        "notes.txt": "not a plugin",
    }
    found = discover(write_plugins(tmp_path, files), entry_points=False, builtins=False)
    by = {f.name: f for f in found}
    assert set(by) == {"a_syntax", "b_raises", "c_exits", "d_no_plugin", "e_missing_dep", "good"}
    assert by["a_syntax"].error.startswith("import failed: SyntaxError")
    assert by["b_raises"].error.startswith("import failed: RuntimeError: no config (b_raises.py:1)")
    assert by["c_exits"].error.startswith("import failed: SystemExit: 2")
    assert "no `plugin = evacore.plugins.Plugin(" in by["d_no_plugin"].error
    assert "ModuleNotFoundError" in by["e_missing_dep"].error
    assert isinstance(by["good"], LoadedPlugin)
    assert not any(name.startswith("_evacore_plugin_") and name.endswith("b_raises") for name in sys.modules)


def test_r3_duplicate_names_make_the_second_broken(load_plugins: Loader) -> None:
    manager = load_plugins({"one.py": GOOD, "two.py": GOOD})
    listing = manager.list()
    assert [(p["name"], p["state"]) for p in listing] == [("good", "active"), ("good", "broken")]
    assert str(listing[1]["broken"]).startswith("duplicate plugin name 'good': already loaded from ")
    assert listing[1]["origin"].endswith("two.py")


def test_r3_package_plugins_and_entry_points_are_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "plugins" / "packaged"
    pkg.mkdir(parents=True)
    (pkg / "helpers.py").write_text("SUFFIX = '!'\n")
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from evacore.plugins import Plugin
        from .helpers import SUFFIX
        plugin = Plugin(name="packaged", version="1")

        @plugin.postprocess
        async def bang(ctx):
            ctx.text += SUFFIX
    """))
    site = tmp_path / "site"
    (site / "ep_plugin_dist-1.0.dist-info").mkdir(parents=True)
    (site / "ep_plugin_dist-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ep-plugin-dist\nVersion: 1.0\n")
    (site / "ep_plugin_dist-1.0.dist-info" / "entry_points.txt").write_text(
        "[evacore.plugins]\nfrom_ep = ep_plugin_mod\nbroken_ep = ep_plugin_missing_mod\n")
    (site / "ep_plugin_mod.py").write_text(
        "from evacore.plugins import Plugin\nplugin = Plugin(name='from-entry-point', version='2')\n")
    monkeypatch.syspath_prepend(str(site))
    found = {f.name: f for f in discover(tmp_path / "plugins", builtins=True)}
    assert isinstance(found["packaged"], LoadedPlugin)
    assert isinstance(found["from-entry-point"], LoadedPlugin)
    assert found["from-entry-point"].origin == "entry point from_ep (ep_plugin_mod)"
    assert isinstance(found["broken_ep"], BrokenPlugin)
    assert isinstance(found["regex_scripts"], LoadedPlugin) and found["regex_scripts"].builtin


def test_r12_6_plugin_name_must_be_url_safe() -> None:
    with pytest.raises(PluginDefinitionError):
        Plugin(name="bad name/with slash", version="1")
    with pytest.raises(PluginDefinitionError, match="pydantic model class"):
        Plugin(name="x", settings=dict)  # type: ignore[arg-type]
