"""What a tour's steps need before the first request: the offered tools and the stream rules.

Must not: execute tools or judge answers; it only decides what this tour is offered (by
role and environment, never by message text) and loads the rules' state. Tools the client
declares itself (`tour.external_tools`) are offered beside evacore's; on a name clash the
client's declaration wins and evacore's tool of that name is not offered in this tour.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evacore.agent.registry import ToolPolicy, ToolRegistry, ToolSettings
from evacore.agent.tools.client_ops import make_client_op_tools
from evacore.agent.tools.external import external_names

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


@dataclass
class TourTools:
    registry: ToolRegistry
    """Only the tools this tour is offered."""
    services: dict[str, Any] = field(default_factory=dict)
    settings: ToolSettings = field(default_factory=ToolSettings)
    policy: ToolPolicy = field(default_factory=ToolPolicy)


def tool_settings(core: Core) -> ToolSettings:
    """The tools' limits from `agent.*` settings (every ToolSettings field has one)."""
    agent = core.settings.agent
    return ToolSettings(
        shell_timeout=agent.shell_timeout,
        shell_max_timeout=agent.shell_max_timeout,
        shell_output_cap=agent.shell_output_cap,
        shell_kill_grace=agent.shell_kill_grace,
        read_max_bytes=agent.read_max_bytes,
        write_max_bytes=agent.write_max_bytes,
        list_max_entries=agent.list_max_entries,
        client_op_timeout=agent.client_op_timeout,
        tool_timeouts=dict(agent.tool_timeouts),
    )


_POLICY: list[Any] = [None, None]
"""The last tool policy read from the settings: [a copy of its table, the policy]."""


def tool_policy(table: dict[str, Any]) -> ToolPolicy:
    """The policy of the settings' `agent.tool_policy` table, read again only when the table
    changed (one policy object, so the registry's answers for it are reused)."""
    if _POLICY[1] is None or _POLICY[0] != table:
        _POLICY[1] = ToolPolicy.from_dict(table)
        _POLICY[0] = copy.deepcopy(table)
    return _POLICY[1]  # type: ignore[no-any-return]


def tools_for_tour(core: Core, tour: Tour) -> TourTools:
    policy = tool_policy(core.settings.agent.tool_policy)
    registry = core.tools
    if tour.client_ops:
        registry = registry.with_tools(make_client_op_tools(tour.client_ops))
    offered = registry.offered(tour.role, tour.flags(), policy=policy)
    if tour.external_tools:
        theirs = external_names(tour.external_tools)
        shadowed = [t.name for t in offered if t.name in theirs]
        if shadowed:
            tour.diagnostics["tools_shadowed"] = shadowed
        offered = [t for t in offered if t.name not in theirs]
    services: dict[str, Any] = {
        "client_ops": core.client_ops,
        "emit_client_op": lambda call_id, name, args: tour.events.emit(
            "client_op", {"id": call_id, "call_id": call_id, "name": name, "arguments": args,
                          "tour_id": tour.id, "timeout": core.settings.agent.client_op_timeout}
        ),
        "core": core,
        "tour": tour,
    }
    services.update(core.tool_services)
    return TourTools(
        registry=ToolRegistry(offered), services=services, settings=tool_settings(core),
        policy=policy,
    )


async def prepare_steps(core: Core, tour: Tour) -> None:
    """Tools and rules for this tour, recorded in diagnostics."""
    tools = tools_for_tour(core, tour)
    tour.data["tools"] = tools
    schemas = ToolRegistry.schemas(tools.registry.get(n) for n in tools.registry.names())
    tour.diagnostics["tools_offered"] = [s["function"]["name"] for s in schemas]
    if tour.external_tools:
        tour.data["external_names"] = external_names(tour.external_tools)
        tour.diagnostics["tools_external"] = sorted(tour.data["external_names"])
        schemas = [*schemas, *tour.external_tools]
    tour.data["tool_schemas"] = schemas
    if core.rules is not None:
        tour.data["rules"] = await core.rules.load_for_tour(tour)
