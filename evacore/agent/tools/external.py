"""Tools a client declares and runs itself (the OpenAI facade's `tools`): checked declarations
and the schemas offered to the model next to evacore's own tools.

Must not: run anything. A call of an external tool ends the tour's response; its result
comes back with the client's next request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evacore.errors import InvalidInput

MAX_TOOLS = 128
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_external_tools(tools: Any) -> list[dict[str, Any]]:
    """Declarations as OpenAI function tools `{"type": "function", "function": {name,
    description, parameters[, strict]}}`; a malformed list raises `InvalidInput`."""
    if not isinstance(tools, list):
        raise InvalidInput("tools must be a list")
    if len(tools) > MAX_TOOLS:
        raise InvalidInput(f"at most {MAX_TOOLS} tools may be declared")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            raise InvalidInput(f"tools[{i}] must be a function tool")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidInput(f"tools[{i}].function.name must match [A-Za-z0-9_-]{{1,64}}")
        if name in seen:
            raise InvalidInput(f"tool {name} is declared twice")
        seen.add(name)
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise InvalidInput(f"tools[{i}].function.description must be a string")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            raise InvalidInput(f"tools[{i}].function.parameters must be a JSON schema object")
        clean: dict[str, Any] = {"name": name, "description": description,
                                 "parameters": dict(parameters)}
        if isinstance(function.get("strict"), bool):
            clean["strict"] = function["strict"]
        out.append({"type": "function", "function": clean})
    return out


def external_names(tools: list[dict[str, Any]]) -> frozenset[str]:
    return frozenset(t["function"]["name"] for t in tools)
