"""Roles and environment flags of a tour (SPEC §1).

Must not: decide roles from message text; roles come from the authenticated identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import Field, StrictBool

Role = Literal["master", "trusted", "guest"]
ROLES: tuple[str, ...] = ("master", "trusted", "guest")
EnvFlag = Literal["telegram", "client_ops", "master", "trusted", "picture"]
ENV_FLAGS: tuple[str, ...] = get_args(EnvFlag)
EnvOverrides = Annotated[dict[EnvFlag, StrictBool], Field(max_length=len(ENV_FLAGS))]
"""A request's `env` (§13): known flags only, each `true` or `false` (never "yes" or 1)."""


def env_for_role(role: str) -> dict[str, bool]:
    """The environment flags that follow from who is speaking."""
    return {
        "telegram": False,
        "client_ops": False,
        "master": role == "master",
        "trusted": role in ("master", "trusted"),
        "picture": False,
    }


@dataclass(frozen=True)
class Identity:
    """Who is speaking, as an authenticated token says (every channel's caller)."""

    user_id: str
    name: str
    role: str

    @property
    def is_master(self) -> bool:
        return self.role == "master"

    @property
    def is_trusted(self) -> bool:
        return self.role in ("master", "trusted")
