"""docs/plugins.md documents every hook kind, ctx field and capability; its example works; the
public names of evacore.plugins match `__all__`."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import evacore.plugins
from evacore.plugins import CtxBase, PluginManager, discover
from evacore.plugins.spec import CAPABILITIES, COMMON_CTX_FIELDS, HOOK_KINDS, REGISTRATIONS
from tests.plugins.conftest import prompt, tour

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


@pytest.fixture(scope="module")
def docs() -> str:
    return DOCS.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", sorted(HOOK_KINDS))
def test_r3_every_hook_kind_and_its_ctx_fields_are_documented(docs: str, kind: str) -> None:
    spec = HOOK_KINDS[kind]
    assert f"### `{spec.decorator}`" in docs
    section = docs.split(f"### `{spec.decorator}`", 1)[1].split("\n### ", 1)[0]
    for field in spec.ctx_fields:
        assert f"`ctx.{field}" in section, f"ctx.{field} of {kind} hooks is not documented"
    for cap in (spec.read_capability, spec.write_capability):
        assert f"`{cap}`" in section
    assert f"{spec.default_timeout:g} s" in section


@pytest.mark.parametrize("field", COMMON_CTX_FIELDS)
def test_r3_common_ctx_fields_are_documented(docs: str, field: str) -> None:
    section = docs.split("### Fields every ctx has", 1)[1].split("\n### ", 1)[0]
    assert f"`ctx.{field}" in section


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_r3_4_every_capability_is_in_the_docs_table(docs: str, capability: str) -> None:
    assert f"| `{capability}` | {CAPABILITIES[capability]}" in docs.replace("`@plugin.macro`", "@plugin.macro") \
        .replace("`@plugin.tool`", "@plugin.tool")


@pytest.mark.parametrize("decorator", sorted(REGISTRATIONS))
def test_r3_registrations_are_documented(docs: str, decorator: str) -> None:
    assert f"`@plugin.{decorator}(" in docs and f"capability `{REGISTRATIONS[decorator]}`" in docs


def test_r3_4_docs_say_plugins_are_trusted_code_and_how_to_grant(docs: str) -> None:
    assert "In-process plugins are trusted code" in docs and "not a sandbox" in docs
    assert "PATCH /v1/plugins/word-filter" in docs and '{"enabled": true, "permissions": [' in docs


def test_r3_1_docs_state_the_order_rule(docs: str) -> None:
    assert "**lower first**" in docs and "then hook (function) name" in docs


def _example(docs: str) -> str:
    match = re.search(r"```python\n# file: word_filter\.py\n(.*?)```", docs, re.DOTALL)
    assert match, "the complete example plugin is missing"
    return match.group(1)


async def test_r12_6_the_documented_example_plugin_loads_and_works(docs: str, tmp_path: Path) -> None:
    (tmp_path / "word_filter.py").write_text(_example(docs), encoding="utf-8")
    manager = PluginManager(discover(tmp_path, entry_points=False, builtins=False))
    entry = manager.describe("word-filter")
    assert entry["state"] == "waiting_permission"
    assert entry["missing_permissions"] == ["macros", "prompt:write", "response:write", "tools"]
    manager.update("word-filter", enabled=True, permissions=entry["missing_permissions"],
                   settings={"banned": ["darn", "heck"]})
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    note = result.messages[-2]
    assert result.messages[-1]["kind"] == "input"  # the note goes just before the input
    assert (note["content"], note["source"], note["id"]) == (
        "Never use these words: darn, heck.", "plugin:word-filter", "plugin:word-filter:1")
    text, _ = await manager.dispatcher.run_postprocess("oh darn, heck", ctx_base=tour())
    assert text == "oh ***, ***"
    hooks = manager.dispatcher.stream_hooks(tour())
    assert [await hooks.feed(d) for d in ("darn ", "it")] == ["*** ", "it"]
    assert manager.dispatcher.macro_functions()["shout"](None, "hey") == "HEY"
    assert await manager.dispatcher.run_tool("count_words", {"text": "a b c"}, ctx_base=CtxBase()) == "3"


def test_p5_all_matches_the_public_names() -> None:
    exported = set(evacore.plugins.__all__)
    public = {n for n, v in vars(evacore.plugins).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert exported == public
    for name in exported:
        assert getattr(evacore.plugins, name) is not None
