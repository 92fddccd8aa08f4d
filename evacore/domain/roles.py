"""Roles and environment flags of a tour (SPEC §1).

Must not: decide roles from message text; roles come from the authenticated identity.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["master", "trusted", "guest"]
ROLES: tuple[str, ...] = ("master", "trusted", "guest")
ENV_FLAGS: tuple[str, ...] = ("telegram", "client_ops", "master", "trusted", "picture")


def env_for_role(role: str) -> dict[str, bool]:
    """The environment flags that follow from who is speaking."""
    return {
        "telegram": False,
        "client_ops": False,
        "master": role == "master",
        "trusted": role in ("master", "trusted"),
        "picture": False,
    }
