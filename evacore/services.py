"""Builds the services a Core offers to tours (plugins, tools, providers, rules …).

Must not: hold service logic itself; each service lives in its own package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evacore.core import Core


async def install_services(core: Core) -> None:
    """Attach every service to `core.services`; later packages add theirs here."""
    from evacore.pipeline.connect import ProviderPool
    from evacore.pipeline.manager import TourManager
    from evacore.rules.service import install_rules
    from evacore.store.connections import ensure_mock

    async with core.session() as s:
        await ensure_mock(s)
    core.services["providers"] = ProviderPool()
    core.services["tours"] = TourManager(core)
    # Each package that offers services installs them here, one line each.
    from evacore.plugins.host import install_plugins; await install_plugins(core)  # noqa: E702
    await install_rules(core)
    from evacore.lore.service import install_lore; await install_lore(core)  # noqa: E702
    from evacore.memory import install_memory; await install_memory(core)  # noqa: E702
