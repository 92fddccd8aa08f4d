"""Memory (R2.5): memory blocks bound to a chat, character or user, the model's memory tools,
and retrieval of past messages and data-bank documents (lexical always, vectors optional).

Must not: import the pipeline; the memory stage (pipeline/stages/memory.py) uses this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core


async def install_memory(core: Core) -> None:
    """Add the memory service, its save hook and the memory tools to a core."""
    from evacore.agent.setup import base_registry
    from evacore.memory.service import MemoryService
    from evacore.memory.tools import memory_tools

    service = MemoryService(core)
    core.services["memory"] = service
    core.services.setdefault("save_hooks", []).append(service.save_hook)
    registry = base_registry(core)
    for tool in memory_tools():
        if registry.get(tool.name) is None:
            registry.register(tool)
