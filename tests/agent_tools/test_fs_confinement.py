"""R5.2: the file tools never reach outside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evacore.agent.registry import run_tool
from evacore.agent.tools import default_registry


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret\n")
    return folder


async def call(ctx, name: str, **args: object) -> tuple[str, bool]:
    import json

    outcome = await run_tool(default_registry(), name, json.dumps(args), ctx)
    return outcome.output, outcome.error


@pytest.mark.parametrize("name", ["read_file", "write_file", "list_dir", "write_diff"])
async def test_r5_2_absolute_path_is_refused(make_ctx, outside, name) -> None:
    extra = {"write_file": {"content": "x"}, "write_diff": {"diff": "@@ -1 +1 @@\n-a\n+b"}}
    output, error = await call(make_ctx(), name, path=str(outside / "secret.txt"),
                               **extra.get(name, {}))
    assert error
    assert output.startswith("error: PathEscape: ")
    assert "absolute paths are not allowed" in output
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_r5_2_dotdot_escape_is_refused(make_ctx, outside) -> None:
    output, error = await call(make_ctx(), "read_file", path="../outside/secret.txt")
    assert error and "'..' leads outside the workspace" in output
    output, error = await call(make_ctx(), "write_file", path="a/../../x.txt", content="x")
    assert error and "PathEscape" in output
    assert not (outside.parent / "x.txt").exists()


async def test_r5_2_dotdot_that_stays_inside_is_allowed(make_ctx, workspace) -> None:
    (workspace / "b.txt").write_text("bee\n")
    output, error = await call(make_ctx(), "read_file", path="a/./../b.txt")
    assert (output, error) == ("bee\n", False)


async def test_r5_2_symlinked_file_leading_out_is_refused(make_ctx, workspace, outside) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    output, error = await call(make_ctx(), "read_file", path="link.txt")
    assert error and "link.txt is a symlink that leads outside the workspace" in output
    assert "top secret" not in output
    output, error = await call(make_ctx(), "write_file", path="link.txt", content="pwned")
    assert error and "PathEscape" in output
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_r5_2_dangling_symlink_leading_out_is_refused(make_ctx, workspace, outside) -> None:
    (workspace / "new.txt").symlink_to(outside / "created.txt")
    output, error = await call(make_ctx(), "write_file", path="new.txt", content="x")
    assert error and "PathEscape" in output
    assert not (outside / "created.txt").exists()


async def test_r5_2_symlinked_dir_leading_out_is_refused(make_ctx, workspace, outside) -> None:
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    for name, args in (("list_dir", {}), ("read_file", {}), ("write_file", {"content": "x"})):
        path = "out" if name == "list_dir" else "out/secret.txt"
        output, error = await call(make_ctx(), name, path=path, **args)
        assert error and "out is a symlink that leads outside the workspace" in output, name
    output, error = await call(make_ctx(), "write_file", path="out/sub/new.txt", content="x")
    assert error and "PathEscape" in output
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_r5_2_symlink_staying_inside_is_allowed(make_ctx, workspace) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("alpha\n")
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)
    (workspace / "a-link.txt").symlink_to("real/a.txt")
    assert await call(make_ctx(), "read_file", path="alias/a.txt") == ("alpha\n", False)
    output, error = await call(make_ctx(), "write_file", path="a-link.txt", content="beta\n")
    assert not error, output
    assert (workspace / "a-link.txt").is_symlink()
    assert (workspace / "real" / "a.txt").read_text() == "beta\n"


async def test_r5_2_write_creates_parent_folders_inside(make_ctx, workspace) -> None:
    output, error = await call(make_ctx(), "write_file", path="deep/er/note.md", content="hi")
    assert (output, error) == ("wrote 2 bytes to deep/er/note.md (new file)", False)
    assert (workspace / "deep" / "er" / "note.md").read_text() == "hi"


async def test_r5_2_missing_workspace_is_created(make_ctx, workspace) -> None:
    workspace.rmdir()
    assert await call(make_ctx(), "list_dir") == ("", False)
    assert workspace.is_dir()
