"""The built-in tools and a registry holding them (R5.2).

Must not: hold tool code itself (each tool lives in its module) or register memory, rule,
plugin or client-op tools (their owners add them with `registry.register` / `with_tools`).
"""

from __future__ import annotations

from evacore.agent.registry import Tool, ToolRegistry
from evacore.agent.tools.fs import fs_tools
from evacore.agent.tools.shell import shell_tool
from evacore.agent.tools.telegram import telegram_tool

__all__ = ["builtin_tools", "default_registry"]


def builtin_tools() -> list[Tool]:
    """read_file, list_dir, write_file, write_diff, shell, telegram_react (new objects each call)."""
    return [*fs_tools(), shell_tool(), telegram_tool()]


def default_registry() -> ToolRegistry:
    """A fresh registry with the built-in tools."""
    return ToolRegistry(builtin_tools())
