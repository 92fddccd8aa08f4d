"""R5.2: write_diff applies a unified diff or search/replace blocks, all or nothing."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evacore.agent.registry import run_tool
from evacore.agent.tools import default_registry
from evacore.agent.tools._patch import apply_patch

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 21))


@pytest.fixture
def target(workspace: Path) -> Path:
    path = workspace / "src" / "notes.txt"
    path.parent.mkdir()
    path.write_text(ORIGINAL)
    return path


async def diff(ctx, text: str, path: str = "src/notes.txt") -> tuple[str, bool]:
    outcome = await run_tool(default_registry(), "write_diff",
                             json.dumps({"path": path, "diff": text}), ctx)
    return outcome.output, outcome.error


async def test_r5_2_unified_diff_applies(make_ctx, target: Path) -> None:
    patch = (
        "diff --git a/src/notes.txt b/src/notes.txt\n"
        "--- a/src/notes.txt\n+++ b/src/notes.txt\n"
        "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+line three\n line 4\n"
        "@@ -15,3 +15,5 @@ section\n line 15\n+new a\n+new b\n line 16\n-line 17\n"
    )
    output, error = await diff(make_ctx(), patch)
    assert (output, error) == ("applied 2 hunks to src/notes.txt (+3/-2 lines)", False)
    expected = (ORIGINAL.replace("line 3\n", "line three\n")
                .replace("line 15\n", "line 15\nnew a\nnew b\n").replace("line 17\n", ""))
    assert target.read_text() == expected


async def test_r5_2_unified_diff_tolerates_shifted_line_numbers(make_ctx, target: Path) -> None:
    patch = "@@ -7,3 +7,3 @@\n line 10\n-line 11\n+eleven\n line 12   \n"
    output, error = await diff(make_ctx(), patch)
    assert not error, output
    assert "hunk 1 applied 3 line(s) later than its header says" in output
    assert "line 10\neleven\nline 12\n" in target.read_text()


async def test_r5_2_unified_diff_with_bare_hunk_headers(make_ctx, target: Path) -> None:
    output, error = await diff(make_ctx(), "@@\n line 5\n-line 6\n+six\n")
    assert not error, output
    assert "line 5\nsix\nline 7\n" in target.read_text()


async def test_r5_2_unified_diff_fuzz_drops_stale_context(make_ctx, target: Path) -> None:
    patch = "@@ -4,4 +4,4 @@\n changed context\n line 5\n-line 6\n+six\n line 7\n"
    output, error = await diff(make_ctx(), patch)
    assert not error, output
    assert "hunk 1 matched without 1 context line(s)" in output, output
    assert "line 5\nsix\nline 7\n" in target.read_text()


async def test_r5_2_failing_hunk_leaves_the_file_byte_identical(make_ctx, target: Path) -> None:
    before = target.read_bytes()
    patch = ("--- a/notes.txt\n+++ b/notes.txt\n"
             "@@ -2,2 +2,2 @@\n line 2\n-line 3\n+three\n"
             "@@ -9,3 +9,3 @@\n line 9\n-line ten\n+10\n line 11\n")
    output, error = await diff(make_ctx(), patch)
    assert error
    assert output.startswith("error: PatchFailed: hunk 2 (@@ -9,3 +9,3 @@) does not apply to "
                             "src/notes.txt: ")
    assert "expects 'line ten' but line 10 is 'line 10'" in output
    assert "nothing was written" in output
    assert target.read_bytes() == before


async def test_r5_2_search_replace_blocks_apply(make_ctx, target: Path) -> None:
    patch = (
        "src/notes.txt\n```\n"
        "<<<<<<< SEARCH\nline 4\nline 5\n=======\nfour\nfive\n>>>>>>> REPLACE\n"
        "```\n"
        "<<<<<<< SEARCH\nline 20\n=======\n>>>>>>> REPLACE\n"
    )
    output, error = await diff(make_ctx(), patch)
    assert not error, output
    assert output.startswith("applied 2 search/replace blocks to src/notes.txt")
    text = target.read_text()
    assert "line 3\nfour\nfive\nline 6\n" in text
    assert text.endswith("line 19\n")


async def test_r5_2_failing_block_names_the_block_and_writes_nothing(make_ctx,
                                                                      target: Path) -> None:
    before = target.read_bytes()
    patch = ("<<<<<<< SEARCH\nline 1\n=======\none\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\nline 99\n=======\nx\n>>>>>>> REPLACE\n")
    output, error = await diff(make_ctx(), patch)
    assert error and output.startswith("error: PatchFailed: block 2: the SEARCH text is not in")
    assert target.read_bytes() == before
    inside_lines = "<<<<<<< SEARCH\nne 1\n=======\nx\n>>>>>>> REPLACE\n"  # lines 1, 10..19
    output, error = await diff(make_ctx(), inside_lines)
    assert error and "block 1: the SEARCH text occurs 11 times" in output
    assert target.read_bytes() == before
    target.write_text("a\nb\na\nb\n")
    output, error = await diff(make_ctx(), "<<<<<<< SEARCH\na\nb\n=======\nc\n>>>>>>> REPLACE")
    assert error and "block 1: the SEARCH text occurs 2 times" in output
    assert target.read_text() == "a\nb\na\nb\n"


async def test_r5_2_search_replace_inside_a_line(make_ctx, target: Path) -> None:
    patch = "<<<<<<< SEARCH\nne 7\n=======\nne seven\n>>>>>>> REPLACE\n"
    output, error = await diff(make_ctx(), patch)
    assert not error, output
    assert "line 6\nline seven\nline 8\n" in target.read_text()


async def test_r5_2_write_diff_keeps_crlf_line_ends(make_ctx, workspace: Path) -> None:
    path = workspace / "win.txt"
    path.write_bytes(b"a\r\nb\r\nc\r\n")
    output, error = await diff(make_ctx(), "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", path="win.txt")
    assert not error, output
    assert path.read_bytes() == b"a\r\nB\r\nc\r\n"


async def test_r5_2_write_diff_needs_an_existing_text_file(make_ctx, workspace: Path) -> None:
    output, error = await diff(make_ctx(), "@@\n-a\n+b\n", path="missing.txt")
    assert error and output == "error: no such file or directory: missing.txt"
    assert not (workspace / "missing.txt").exists()
    output, error = await diff(make_ctx(), "just words", path="src")
    assert error


async def test_r5_2_write_diff_rejects_a_diff_without_hunks(make_ctx, target: Path) -> None:
    output, error = await diff(make_ctx(), "please change line 3")
    assert error and output.startswith("error: PatchFailed: no hunks found")
    two_files = "--- a/x\n+++ b/x\n@@\n-a\n+b\n--- a/y\n+++ b/y\n@@\n-a\n+b\n"
    output, error = await diff(make_ctx(), two_files)
    assert error and "more than one file" in output


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "", "  x", "def f():"]), max_size=30),
       st.lists(st.sampled_from(["a", "b", "c", "", "  x", "new"]), max_size=30),
       st.integers(min_value=0, max_value=3))
def test_r5_2_any_unified_diff_from_difflib_round_trips(old, new, context) -> None:
    before = "".join(f"{line}\n" for line in old)
    after = "".join(f"{line}\n" for line in new)
    patch = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                         "a/f", "b/f", n=context))
    if not patch:
        return
    assert apply_patch(before, patch, "f").text == after
