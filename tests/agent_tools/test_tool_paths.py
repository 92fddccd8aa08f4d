"""R5.2/R5.3: a tool's failure names paths relative to the workspace and never shows where
the workspace is on the core's machine."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evacore.agent.registry import Tool, ToolContext, ToolRegistry, run_tool
from evacore.agent.tools import default_registry


async def call(ctx: ToolContext, name: str, registry: ToolRegistry | None = None,
               **args: object) -> tuple[str, bool]:
    outcome = await run_tool(registry or default_registry(), name, json.dumps(args), ctx)
    return outcome.output, outcome.error


def hidden(output: str, workspace: Path) -> bool:
    return str(workspace) not in output and os.path.realpath(workspace) not in output


async def test_r5_2_machine_failures_name_paths_inside_the_workspace(make_ctx, workspace) -> None:
    (workspace / "loop").symlink_to("loop")
    (workspace / "sub").mkdir()
    long_name = "sub/" + "n" * 300
    cases = [
        ("read_file", {"path": long_name}, "error: File name too long: " + long_name),
        ("list_dir", {"path": long_name}, "error: File name too long: " + long_name),
        ("write_file", {"path": long_name, "content": "x"}, "error: File name too long: "),
        ("read_file", {"path": "loop"}, "error: Too many levels of symbolic links: loop"),
        ("write_diff", {"path": "loop", "diff": "@@ -1 +1 @@\n-a\n+b"},
         "error: Too many levels of symbolic links: loop"),
    ]
    for name, args, expected in cases:
        output, error = await call(make_ctx(), name, **args)
        assert error and output.startswith(expected), (name, output)
        assert hidden(output, workspace), output


async def test_r5_2_list_dir_shows_absolute_link_targets_relative(make_ctx, workspace, tmp_path
                                                                  ) -> None:
    (workspace / "notes").mkdir()
    (workspace / "notes" / "a.txt").write_text("a")
    (workspace / "inside").symlink_to(workspace / "notes" / "a.txt")
    (workspace / "outside").symlink_to(tmp_path / "elsewhere.txt")
    (workspace / "relative").symlink_to("notes/a.txt")
    output, error = await call(make_ctx(), "list_dir")
    assert not error
    assert output.splitlines() == [
        "inside -> notes/a.txt  (symlink)",
        "notes/",
        "outside -> (a path outside the workspace)  (symlink)",
        "relative -> notes/a.txt  (symlink)",
    ]
    assert hidden(output, workspace) and str(tmp_path) not in output


async def test_r5_2_an_uncreatable_workspace_is_not_shown(make_ctx, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    ctx = make_ctx()
    ctx = type(ctx)(**{**ctx.__dict__, "workspace": blocker / "workspace"})
    for name, args in (("read_file", {"path": "x"}), ("shell", {"command": "true"})):
        output, error = await call(ctx, name, **args)
        assert error and output.startswith("error: the workspace folder cannot be created"), output
        assert str(tmp_path) not in output


async def test_r5_3_any_tool_failure_hides_the_workspace_path(make_ctx, workspace) -> None:
    async def crash(args: dict[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError(f"cannot parse {ctx.workspace}/data/x.csv in {ctx.workspace}")

    registry = ToolRegistry([Tool(
        name="crash", description="fails", parameters={"type": "object", "properties": {}},
        handler=crash, roles=frozenset({"guest"}), kind="plugin", timeout=5.0)])
    output, error = await call(make_ctx("guest"), "crash", registry)
    assert (output, error) == ("error: RuntimeError: cannot parse data/x.csv in .", True)
