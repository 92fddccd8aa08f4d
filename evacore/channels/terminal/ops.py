"""Client ops (R9.2, R14.3), client side: the operations `evacore client` declares, and their
execution on this machine inside `--root` only.

The file ops and `shell` run the very code of the core's own tools (evacore/agent/tools) with
`--root` as their workspace, so the confinement is the same: no `..` above the root, no
absolute paths, no symlink out; each refusal is an error result, nothing is read or written.
Must not: run an op that was not allowed, or one the person declined (a "no" is an error
result); print or prompt (the caller's `confirm` asks).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evacore.agent.registry import (
    Tool,
    ToolContext,
    ToolRegistry,
    ToolSettings,
    parse_arguments,
    run_tool,
)
from evacore.agent.tools.fs import list_dir, read_file, write_file
from evacore.agent.tools.shell import shell
from evacore.errors import ToolError

DEFAULT_OPS = ("shell", "read_file", "write_file", "list_dir")
DECLINED = "the master declined to run this op on his machine"
TOO_LATE = "not run: it was confirmed after the core had stopped waiting for its answer"
ANSWER_MARGIN = 2.0
"""Seconds kept before the core's deadline for posting an op's answer."""
SHELL_TIMEOUT = 50.0
"""Below the server's wait for an op's answer (`agent.client_op_timeout`, 60 s), so that a
shell op cut at its timeout still reaches the model with its output so far."""

_PATH = {"type": "string", "description": "A path relative to the client's root folder."}
_OPS: dict[str, tuple[str, dict[str, Any], Any, str]] = {
    "shell": (
        ("Run a command with /bin/sh -c on the master's own machine, in the client's root "
        "folder. No terminal and no input; stdout and stderr come back together, a non-zero "
        "exit as [exit N]; on timeout the command and its children are killed."),
        {"type": "object", "properties": {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout": {"type": "number", "description": "Seconds before it is killed."},
        }, "required": ["command"]},
        shell, "machine"),
    "read_file": (
        ("Read a text file on the master's own machine, inside the client's root folder. For "
        "a part of a long file give offset (first line, from 1) and limit (number of lines)."),
        {"type": "object", "properties": {
            "path": _PATH,
            "offset": {"type": "integer", "description": "First line to return, from 1."},
            "limit": {"type": "integer", "description": "How many lines to return."},
        }, "required": ["path"]},
        read_file, "read"),
    "write_file": (
        ("Write a whole text file on the master's own machine, inside the client's root "
        "folder, creating it and its folders if needed, replacing it if it exists."),
        {"type": "object", "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete new content."},
        }, "required": ["path", "content"]},
        write_file, "write"),
    "list_dir": (
        ("List a folder on the master's own machine, inside the client's root folder: folders "
        "end with '/', files show their size in bytes, symlinks their target."),
        {"type": "object", "properties": {
            "path": {"type": "string", "description": "A folder relative to the client's "
                     "root folder; default: the root itself."},
        }},
        list_dir, "read"),
}

Confirm = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""`confirm(op_name, arguments)`: True to run the op."""


def parse_allow(values: Iterable[str] | None) -> tuple[str, ...]:
    """`--allow` values (each may be a comma-separated list) as op names, in the given order."""
    if not values:
        return DEFAULT_OPS
    names: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if name not in _OPS:
                raise ValueError(f"unknown op {name!r}; the ops are {', '.join(DEFAULT_OPS)}")
            if name not in names:
                names.append(name)
    if not names:
        raise ValueError("--allow names no op")
    return tuple(names)


def declarations(allowed: Iterable[str]) -> list[dict[str, Any]]:
    """The `client_ops` of a generate request body for these ops."""
    return [{"name": name, "description": _OPS[name][0], "parameters": _OPS[name][1]}
            for name in allowed]


@dataclass(frozen=True)
class OpResult:
    """What is posted back: the op's exact output, or the reason it failed (`error`)."""

    content: str
    error: bool = False


class OpRunner:
    """Runs the allowed ops inside `root`, asking `confirm` first when one is given."""

    def __init__(self, root: Path, allowed: Iterable[str] = DEFAULT_OPS, *,
                 confirm: Confirm | None = None, shell_timeout: float = SHELL_TIMEOUT,
                 output_cap: int = 100_000) -> None:
        self.root = root.resolve()
        self.allowed = tuple(allowed)
        self.confirm = confirm
        self._tools = {name: Tool(name=name, description=_OPS[name][0],
                                  parameters=_OPS[name][1], handler=_OPS[name][2],
                                  roles=frozenset({"master"}), kind=_OPS[name][3],
                                  timeout=None if name == "shell" else 60.0)
                       for name in self.allowed}
        self._registry = ToolRegistry(self._tools.values())
        self._settings = ToolSettings(shell_timeout=shell_timeout,
                                      shell_max_timeout=shell_timeout,
                                      shell_output_cap=output_cap)

    async def run(self, name: str, arguments: Any, deadline: float | None = None) -> OpResult:
        """Run one op; `deadline` (`time.monotonic()`): when the core stops waiting for its
        answer. An op confirmed after that does not run, and a shell op is cut short of it,
        so that what it did reaches the model."""
        tool = self._tools.get(name)
        if tool is None:
            return OpResult(f"this client does not offer the op {name!r}; it offers "
                            f"{', '.join(self.allowed)}", True)
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        try:
            args = parse_arguments(raw, tool.parameters)
        except ToolError as exc:
            return OpResult(exc.message, True)
        if self.confirm is not None and not await self.confirm(name, args):
            return OpResult(DECLINED, True)
        settings = self._settings
        if deadline is not None:
            left = math.floor((deadline - time.monotonic() - ANSWER_MARGIN) * 10) / 10
            if left <= 0:
                return OpResult(TOO_LATE, True)
            if left < settings.shell_max_timeout:
                settings = replace(settings, shell_timeout=min(settings.shell_timeout, left),
                                   shell_max_timeout=left)
        ctx = ToolContext(workspace=self.root, role="master", env=frozenset(),
                          abort=asyncio.Event(), settings=settings)
        outcome = await run_tool(self._registry, name, json.dumps(args), ctx)
        if outcome.error:
            return OpResult(outcome.output.removeprefix("error: "), True)
        return OpResult(outcome.output)
