"""Workspace confinement for the file tools: resolve a model-given path, write files
atomically, and say what went wrong with paths relative to the workspace.

Must not: touch anything outside the workspace, show the workspace's absolute path, or be
called on the event loop (it does blocking file I/O; callers run it through
`asyncio.to_thread`).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evacore.agent.registry import workspace_relative
from evacore.errors import PathEscape, ToolError

NEW_FILE_MODE = 0o644


@dataclass(frozen=True)
class WorkspacePath:
    """A path inside the workspace: `real` to open, `shown` (relative, normalized) for messages."""

    real: Path
    shown: str


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def shown_path(workspace: Path, path: str | os.PathLike[str]) -> str:
    """How a message shows a path of the machine: relative to the workspace (`.` for the
    workspace itself), or only as being outside it."""
    path = os.fspath(path)
    for root in dict.fromkeys((os.path.abspath(workspace), os.path.realpath(workspace))):
        full = os.path.abspath(os.path.join(root, path))
        if _inside(full, root):
            return os.path.relpath(full, root).replace(os.sep, "/")
    return "(a path outside the workspace)"


def os_error(exc: OSError, workspace: Path) -> ToolError:
    """A ToolError for a failed file operation, with its paths relative to the workspace."""
    what = exc.strerror or type(exc).__name__
    names = [shown_path(workspace, f) for f in (exc.filename, exc.filename2)
             if isinstance(f, str | bytes | os.PathLike) and not isinstance(f, bytes)]
    message = f"{what}: {' -> '.join(names)}" if names else what
    return ToolError(workspace_relative(message, workspace))


def resolve(workspace: Path, path: str) -> WorkspacePath:
    """Resolve `path` against the workspace, refusing every way out (a PathEscape if one is found).

    Absolute paths and `..` steps above the workspace are refused; then every component is
    resolved with `os.path.realpath` (symlinks followed, missing components kept) and must
    stay inside the workspace's real path. The workspace folder is created if missing.
    """
    if not isinstance(path, str) or "\x00" in path:
        raise ToolError("the path must be text without NUL characters")
    try:
        os.makedirs(workspace, exist_ok=True)
    except OSError as exc:
        raise ToolError("the workspace folder cannot be created: "
                        + (exc.strerror or type(exc).__name__)) from None
    root = os.path.realpath(workspace)
    given = PurePosixPath(path.replace("\\", "/")) if path.strip() else PurePosixPath(".")
    if given.is_absolute() or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        raise PathEscape(f"{path}: absolute paths are not allowed; give a path relative to the workspace")
    parts: list[str] = []
    for part in given.parts:
        if part == ".":
            continue
        if part == "..":
            if not parts:
                raise PathEscape(f"{path}: '..' leads outside the workspace")
            parts.pop()
            continue
        parts.append(part)
    for depth in range(1, len(parts) + 1):
        real = os.path.realpath(os.path.join(root, *parts[:depth]))
        if not _inside(real, root):
            through = "/".join(parts[:depth])
            raise PathEscape(f"{path}: {through} is a symlink that leads outside the workspace")
    real_full = os.path.realpath(os.path.join(root, *parts))
    shown = "/".join(parts) or "."
    return WorkspacePath(real=Path(real_full), shown=shown)


def atomic_write(target: Path, data: bytes) -> None:
    """Replace `target` with `data` through a temporary file in the same folder and os.replace.

    An existing file keeps its permission bits; a new one gets NEW_FILE_MODE.
    """
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
