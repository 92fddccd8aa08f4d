"""docs/tools.md documents every built-in tool, its parameters and every tool setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from evacore.agent.registry import KINDS, ToolSettings
from evacore.render.tool_results import CUT_NOTE, EMPTY_MARKER
from evacore.agent.tools import builtin_tools

DOC = (Path(__file__).parents[2] / "docs" / "tools.md").read_text(encoding="utf-8")


def _section(name: str) -> str:
    start = DOC.index(f"### `{name}`")
    end = DOC.find("\n### ", start + 1)
    return DOC[start:end]


def test_r5_2_every_builtin_tool_and_parameter_is_documented() -> None:
    for tool in builtin_tools():
        section = _section(tool.name)
        for parameter in tool.parameters["properties"]:
            assert f"| `{parameter}` |" in section, (tool.name, parameter)


def test_r5_2_every_tool_setting_and_kind_is_documented() -> None:
    for field in dataclasses.fields(ToolSettings):
        assert f"| `{field.name}` |" in DOC, field.name
    for kind in KINDS:
        assert f"`{kind}`" in DOC, kind


def test_r5_3_result_markers_are_documented() -> None:
    assert f"`{EMPTY_MARKER}`" in DOC
    assert CUT_NOTE.format(cut=12345, total=32345).replace("\n", "\\n") in DOC
