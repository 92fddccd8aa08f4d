"""R5.2: read_file, list_dir and write_file behaviour inside the workspace."""

from __future__ import annotations

import json
import os
from pathlib import Path

from evacore.agent.registry import run_tool
from evacore.agent.tools import default_registry


async def call(ctx, name: str, **args: object) -> tuple[str, bool]:
    outcome = await run_tool(default_registry(), name, json.dumps(args), ctx)
    return outcome.output, outcome.error


async def test_r5_2_read_file_returns_the_exact_text(make_ctx, workspace: Path) -> None:
    text = "line 1\nÜnïcode ✓\n\nno newline at end"
    (workspace / "t.txt").write_text(text, encoding="utf-8")
    assert await call(make_ctx(), "read_file", path="t.txt") == (text, False)
    (workspace / "empty.txt").write_text("")
    assert await call(make_ctx(), "read_file", path="empty.txt") == ("", False)


async def test_r5_2_read_file_offset_and_limit(make_ctx, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"{i}\n" for i in range(1, 11)))
    output, error = await call(make_ctx(), "read_file", path="n.txt", offset=3, limit=2)
    assert (output, error) == ("3\n4\n[lines 3–4 of n.txt; more follows: continue with offset=5]",
                               False)
    output, _ = await call(make_ctx(), "read_file", path="n.txt", offset=9)
    assert output == "9\n10\n[lines 9–10 of n.txt]"
    output, error = await call(make_ctx(), "read_file", path="n.txt", offset=50)
    assert error and output == "error: offset 50 is past the end of n.txt (10 lines)"


async def test_r5_2_read_file_caps_its_size(make_ctx, workspace: Path) -> None:
    (workspace / "big.txt").write_text("abcdefghi\n" * 1000)
    output, error = await call(make_ctx(read_max_bytes=100), "read_file", path="big.txt")
    assert not error
    assert output == "abcdefghi\n" * 10 + "[lines 1–10 of big.txt; more follows: continue with offset=11]"
    (workspace / "one-line.txt").write_text("x" * 500)
    output, _ = await call(make_ctx(read_max_bytes=100), "read_file", path="one-line.txt")
    assert output == "x" * 100 + "\n[lines 1–1 of one-line.txt; line 1 is cut at 100 bytes]"
    (workspace / "ragged.txt").write_text("short\n" + "y" * 300 + "\nend\n")
    output, _ = await call(make_ctx(read_max_bytes=100), "read_file", path="ragged.txt")
    assert output == "short\n[lines 1–1 of ragged.txt; more follows: continue with offset=2]"


async def test_r5_2_read_file_refuses_binary_files_clearly(make_ctx, workspace: Path) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    output, error = await call(make_ctx(), "read_file", path="img.png")
    assert error
    assert output == ("error: img.png is a binary file (16 bytes); "
                      "read_file and write_diff handle text files only")


async def test_r5_2_read_file_on_missing_or_folder(make_ctx, workspace: Path) -> None:
    (workspace / "d").mkdir()
    assert await call(make_ctx(), "read_file", path="nope.txt") == (
        "error: no such file or directory: nope.txt", True)
    assert await call(make_ctx(), "read_file", path="d") == (
        "error: d is a directory; use list_dir", True)


async def test_r5_2_list_dir_sorted_with_type_and_size(make_ctx, workspace: Path) -> None:
    (workspace / "b.txt").write_text("12345")
    (workspace / "A-dir").mkdir()
    (workspace / "c-link").symlink_to("b.txt")
    output, error = await call(make_ctx(), "list_dir", path=".")
    assert not error
    assert output.split("\n") == ["A-dir/", "b.txt  (5 bytes)", "c-link -> b.txt  (symlink)"]


async def test_r5_2_list_dir_is_capped(make_ctx, workspace: Path) -> None:
    for i in range(12):
        (workspace / f"f{i:02}").write_text("")
    output, _ = await call(make_ctx(list_max_entries=5), "list_dir")
    lines = output.split("\n")
    assert lines[:5] == [f"f{i:02}  (0 bytes)" for i in range(5)]
    assert lines[5:] == ["[… 7 more entries not shown]"]


async def test_r5_2_write_file_replaces_atomically(make_ctx, workspace: Path) -> None:
    target = workspace / "conf.ini"
    target.write_text("old")
    os.chmod(target, 0o600)
    output, error = await call(make_ctx(), "write_file", path="conf.ini", content="new ✓")
    assert (output, error) == ("wrote 7 bytes to conf.ini (replaced)", False)
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(workspace)) == ["conf.ini"]


async def test_r5_2_write_file_limits(make_ctx, workspace: Path) -> None:
    output, error = await call(make_ctx(write_max_bytes=3), "write_file", path="x", content="four")
    assert error and output == "error: content is 4 bytes; the limit is 3"
    (workspace / "d").mkdir()
    assert await call(make_ctx(), "write_file", path="d", content="") == (
        "error: d is a directory", True)
    assert not (workspace / "x").exists()
