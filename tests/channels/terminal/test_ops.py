"""R9.2, R14.3: the client-op executor of `evacore client` in process: the declared ops, and
their confinement to --root (the core's file-tool rules), refusals and declines as error results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evacore.agent.tools.client_ops import make_client_op_tools
from evacore.channels.terminal.ops import DECLINED, DEFAULT_OPS, OpRunner, declarations, parse_allow


def test_r14_3_allow_list_defaults_order_and_unknown_names() -> None:
    assert parse_allow(None) == DEFAULT_OPS == ("shell", "read_file", "write_file", "list_dir")
    assert parse_allow(["list_dir, read_file", "read_file"]) == ("list_dir", "read_file")
    with pytest.raises(ValueError, match="unknown op 'rm'"):
        parse_allow(["read_file,rm"])
    with pytest.raises(ValueError, match="names no op"):
        parse_allow([" , "])


def test_r9_2_declarations_are_what_the_server_accepts() -> None:
    tools = make_client_op_tools(declarations(DEFAULT_OPS))
    assert [t.name for t in tools] == [f"client_{n}" for n in DEFAULT_OPS]
    assert all("master's own machine" in t.description for t in tools)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "in.txt").write_text("inside\n")
    (outside / "secret.txt").write_text("SECRET\n")
    (root / "out").symlink_to(outside, target_is_directory=True)
    return root, outside


async def test_r14_3_ops_work_inside_root_and_refuse_every_way_out(
        tree: tuple[Path, Path]) -> None:
    root, outside = tree
    runner = OpRunner(root)
    assert (await runner.run("read_file", {"path": "in.txt"})).content == "inside\n"
    listing = await runner.run("list_dir", {})
    assert "in.txt" in listing.content and "out -> " in listing.content
    written = await runner.run("write_file", {"path": "sub/new.txt", "content": "hi"})
    assert not written.error and (root / "sub" / "new.txt").read_text() == "hi"
    for name, args in [("read_file", {"path": "../outside/secret.txt"}),
                       ("read_file", {"path": str(outside / "secret.txt")}),
                       ("read_file", {"path": "out/secret.txt"}),
                       ("read_file", {"path": "sub/../../outside/secret.txt"}),
                       ("list_dir", {"path": "out"}),
                       ("write_file", {"path": "out/x.txt", "content": "x"}),
                       ("write_file", {"path": "../x.txt", "content": "x"})]:
        result = await runner.run(name, args)
        assert result.error, (name, args)
        assert "SECRET" not in result.content
        assert not result.content.startswith("error:")  # the server adds the prefix once
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (root.parent / "x.txt").exists()


async def test_r14_3_a_declined_or_malformed_op_does_not_run(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def no(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return False

    runner = OpRunner(tmp_path, ("shell", "write_file"), confirm=no)
    declined = await runner.run("shell", {"command": "touch ran"})
    assert (declined.content, declined.error) == (DECLINED, True)
    assert asked == [("shell", {"command": "touch ran"})]
    assert not (tmp_path / "ran").exists()
    missing = await runner.run("write_file", {"content": "no path"})
    assert missing.error and "missing required argument 'path'" in missing.content
    not_offered = await runner.run("read_file", {"path": "x"})
    assert not_offered.error and "does not offer the op 'read_file'" in not_offered.content
    assert len(asked) == 1  # nobody is asked about a call that cannot run


async def test_r14_3_an_op_confirmed_after_the_core_stopped_waiting_does_not_run(
        tmp_path: Path) -> None:
    import time

    from evacore.channels.terminal.ops import TOO_LATE

    said_yes: list[str] = []

    async def confirm(name: str, args: dict[str, Any]) -> bool:
        said_yes.append(name)
        return True

    runner = OpRunner(tmp_path, confirm=confirm)
    result = await runner.run("shell", {"command": "touch made.txt"},
                              deadline=time.monotonic() - 1)
    assert result.error and result.content == TOO_LATE
    assert said_yes == ["shell"] and not (tmp_path / "made.txt").exists()
    result = await runner.run("write_file", {"path": "w.txt", "content": "x"},
                              deadline=time.monotonic() + 1)  # inside the answer's margin
    assert result.content == TOO_LATE and not (tmp_path / "w.txt").exists()


async def test_r14_3_a_shell_op_ends_before_the_core_stops_waiting(tmp_path: Path) -> None:
    import re
    import time

    runner = OpRunner(tmp_path, shell_timeout=50)
    result = await runner.run("shell", {"command": "echo begun; sleep 30"},
                              deadline=time.monotonic() + 3.5)  # 1.5 s to run, 2 s to answer
    # cut at its own timeout, short of the core's deadline, with what it wrote so far
    assert result.error and re.search(r"timed out after 1\.[0-4]s", result.content)
    assert "begun" in result.content
