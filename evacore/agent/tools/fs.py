"""The file tools `read_file`, `list_dir`, `write_file`, `write_diff`, confined to the workspace (R5.2).

Must not: touch a path outside the workspace (every path goes through `_paths.resolve`),
show the workspace's absolute path (failures name paths relative to it), write a partly
patched file, or do file I/O on the event loop (all of it runs in a thread).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.agent.tools._patch import apply_patch, looks_like_search_replace
from evacore.agent.tools._paths import WorkspacePath, atomic_write, os_error, resolve, shown_path
from evacore.errors import ToolError

_SNIFF_BYTES = 8192


def _existing(wp: WorkspacePath) -> os.stat_result:
    try:
        return os.stat(wp.real)
    except FileNotFoundError:
        raise ToolError(f"no such file or directory: {wp.shown}") from None


def _text_file(wp: WorkspacePath) -> os.stat_result:
    info = _existing(wp)
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{wp.shown} is a directory; use list_dir")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{wp.shown} is not a regular file")
    with open(wp.real, "rb") as handle:
        if b"\x00" in handle.read(_SNIFF_BYTES):
            raise ToolError(f"{wp.shown} is a binary file ({info.st_size} bytes); "
                            "read_file and write_diff handle text files only")
    return info


def _read(ctx: ToolContext, path: str, offset: int, limit: int | None) -> str:
    if offset < 1:
        raise ToolError("offset is a line number and starts at 1")
    if limit is not None and limit < 1:
        raise ToolError("limit must be at least 1 line")
    wp = resolve(ctx.workspace, path)
    _text_file(wp)
    cap = ctx.settings.read_max_bytes
    taken: list[bytes] = []
    used, number, more, cut_line = 0, 0, False, False
    with open(wp.real, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number < offset:
                continue
            if (limit is not None and len(taken) >= limit) or used >= cap:
                more = True
                break
            if used + len(raw) > cap:
                more = True
                if not taken:  # a single line longer than the budget: cut it
                    taken.append(raw[: cap - used])
                    cut_line, used = True, cap
                break
            taken.append(raw)
            used += len(raw)
    if offset > 1 and not taken:
        raise ToolError(f"offset {offset} is past the end of {wp.shown} ({number} lines)")
    text = b"".join(taken).decode("utf-8", errors="replace")
    if not more and offset == 1:
        return text
    last = offset + len(taken) - 1
    note = f"[lines {offset}–{last} of {wp.shown}"
    if cut_line:
        note += f"; line {last} is cut at {ctx.settings.read_max_bytes} bytes"
    note += f"; more follows: continue with offset={last + 1}]" if more and not cut_line else "]"
    return text + ("" if text.endswith("\n") or not text else "\n") + note


def _list(ctx: ToolContext, path: str) -> str:
    wp = resolve(ctx.workspace, path)
    info = _existing(wp)
    if not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{wp.shown} is not a directory; use read_file")
    with os.scandir(wp.real) as it:
        entries = sorted(it, key=lambda e: (e.name.lower(), e.name))
    cap = ctx.settings.list_max_entries
    lines = [_describe(entry, ctx.workspace) for entry in entries[:cap]]
    if len(entries) > cap:
        lines.append(f"[… {len(entries) - cap} more entries not shown]")
    return "\n".join(lines)


def _describe(entry: os.DirEntry[str], workspace: Path) -> str:
    try:
        if entry.is_symlink():
            target = os.readlink(entry.path)
            if os.path.isabs(target):
                target = shown_path(workspace, target)
            return f"{entry.name} -> {target}  (symlink)"
        if entry.is_dir(follow_symlinks=False):
            return f"{entry.name}/"
        if entry.is_file(follow_symlinks=False):
            return f"{entry.name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
    except OSError:
        pass
    return f"{entry.name}  (other)"


def _write(ctx: ToolContext, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > ctx.settings.write_max_bytes:
        raise ToolError(f"content is {len(data)} bytes; the limit is {ctx.settings.write_max_bytes}")
    wp = resolve(ctx.workspace, path)
    if wp.shown == ".":
        raise ToolError("a file path is needed, not the workspace folder")
    new = not os.path.lexists(wp.real)
    if not new and os.path.isdir(wp.real):
        raise ToolError(f"{wp.shown} is a directory")
    try:
        os.makedirs(wp.real.parent, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create the folder for {wp.shown}: a file is in the way") from None
    atomic_write(wp.real, data)
    return f"wrote {len(data)} bytes to {wp.shown}" + (" (new file)" if new else " (replaced)")


def _diff(ctx: ToolContext, path: str, diff: str) -> str:
    wp = resolve(ctx.workspace, path)
    info = _text_file(wp)
    if info.st_size > ctx.settings.write_max_bytes:
        raise ToolError(f"{wp.shown} is {info.st_size} bytes; write_diff edits files up to "
                        f"{ctx.settings.write_max_bytes}")
    with open(wp.real, "rb") as handle:
        original = handle.read()
    result = apply_patch(original.decode("utf-8", errors="surrogateescape"), diff, wp.shown)
    data = result.text.encode("utf-8", errors="surrogateescape")
    if len(data) > ctx.settings.write_max_bytes:
        raise ToolError(f"the patched file would be {len(data)} bytes; the limit is "
                        f"{ctx.settings.write_max_bytes}")
    if data != original:
        atomic_write(wp.real, data)
    kind = "search/replace block" if looks_like_search_replace(diff) else "hunk"
    summary = (f"applied {result.pieces} {kind}{'s' if result.pieces != 1 else ''} to {wp.shown} "
               f"(+{result.added}/-{result.removed} lines)")
    if data == original:
        summary += "; the file is unchanged"
    return "\n".join([summary, *result.notes])


def _guarded(op: Callable[..., str], ctx: ToolContext, *args: Any) -> str:
    """Run a file operation; a failure of the machine (permissions, a name too long, a
    symlink loop, a full disk) becomes a ToolError naming paths relative to the workspace."""
    try:
        return op(ctx, *args)
    except OSError as exc:
        raise os_error(exc, ctx.workspace) from None


async def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    return await asyncio.to_thread(_guarded, _read, ctx, args["path"], args.get("offset", 1),
                                   args.get("limit"))


async def list_dir(args: dict[str, Any], ctx: ToolContext) -> str:
    return await asyncio.to_thread(_guarded, _list, ctx, args.get("path", "."))


async def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    return await asyncio.to_thread(_guarded, _write, ctx, args["path"], args["content"])


async def write_diff(args: dict[str, Any], ctx: ToolContext) -> str:
    return await asyncio.to_thread(_guarded, _diff, ctx, args["path"], args["diff"])


_PATH = {"type": "string", "description": "A path relative to the workspace folder."}


def fs_tools() -> list[Tool]:
    """The four file tools with their default roles (read: trusted and master; write: master)."""
    return [
        Tool(
            name="read_file",
            description=("Read a text file from the workspace. Returns its text; for a part of a "
                         "long file give offset (first line, from 1) and limit (number of lines)."),
            parameters={"type": "object", "properties": {
                "path": _PATH,
                "offset": {"type": "integer", "description": "First line to return, from 1."},
                "limit": {"type": "integer", "description": "How many lines to return."},
            }, "required": ["path"]},
            handler=read_file, roles=frozenset({"trusted"}), kind="read", concurrency_safe=True,
        ),
        Tool(
            name="list_dir",
            description=("List a folder of the workspace, sorted by name: folders end with '/', "
                         "files show their size in bytes, symlinks their target."),
            parameters={"type": "object", "properties": {
                "path": {"type": "string", "description": "A folder relative to the workspace; "
                         "default: the workspace itself."},
            }},
            handler=list_dir, roles=frozenset({"trusted"}), kind="read", concurrency_safe=True,
        ),
        Tool(
            name="write_file",
            description=("Write a whole text file in the workspace, creating it and its folders "
                         "if needed, replacing it if it exists."),
            parameters={"type": "object", "properties": {
                "path": _PATH,
                "content": {"type": "string", "description": "The complete new content."},
            }, "required": ["path", "content"]},
            handler=write_file, roles=frozenset({"master"}), kind="write",
        ),
        Tool(
            name="write_diff",
            description=(
                "Change an existing text file in the workspace. `diff` is either a unified diff "
                "('@@ -l,s +l,s @@' hunks with ' ' context, '-' removed and '+' added lines) or "
                "one or more blocks '<<<<<<< SEARCH' / exact old lines / '=======' / new lines / "
                "'>>>>>>> REPLACE'. If any hunk or block does not apply, nothing is written."),
            parameters={"type": "object", "properties": {
                "path": _PATH,
                "diff": {"type": "string", "description": "A unified diff or SEARCH/REPLACE blocks."},
            }, "required": ["path", "diff"]},
            handler=write_diff, roles=frozenset({"master"}), kind="write",
        ),
    ]
