"""R5.2: which tools a tour is offered, by role, environment and the configurable policy."""

from __future__ import annotations

import pytest

from evacore.agent.registry import ToolPolicy
from evacore.agent.tools import default_registry
from evacore.agent.tools.client_ops import make_client_op_tools
from evacore.errors import InvalidInput

ALL_ENV = frozenset({"telegram", "client_ops", "master", "trusted", "picture"})
MACHINE_AND_WRITES = {"shell", "write_file", "write_diff", "read_file", "list_dir"}


def _names(role: str, env: frozenset[str] = ALL_ENV, policy: ToolPolicy | None = None,
           extra: bool = True) -> set[str]:
    registry = default_registry()
    if extra:
        registry = registry.with_tools(make_client_op_tools([{"name": "open_url"}]))
    return {t.name for t in registry.offered(role, env, policy=policy or ToolPolicy())}


def test_r5_2_default_table() -> None:
    assert _names("master") == MACHINE_AND_WRITES | {"telegram_react", "client_open_url"}
    assert _names("trusted") == {"read_file", "list_dir", "telegram_react", "client_open_url"}
    assert _names("guest") == {"telegram_react", "client_open_url"}


@pytest.mark.parametrize("table", [
    None,
    {"guest": {"allow": ["*"]}},
    {"guest": {"allow": ["shell", "write_file", "write_diff", "read_file", "list_dir"]}},
])
def test_r5_2_a_guest_is_never_offered_shell_or_file_tools(table) -> None:
    offered = _names("guest", policy=ToolPolicy.from_dict(table))
    assert not offered & MACHINE_AND_WRITES


def test_r5_2_policy_refuses_to_give_guests_machine_kinds() -> None:
    with pytest.raises(InvalidInput, match="guests may never be offered tools of kind machine"):
        ToolPolicy.from_dict({"guest": {"allow": ["kind:machine"]}})


def test_r5_2_trusted_follows_an_overridden_table() -> None:
    policy = ToolPolicy.from_dict({"trusted": {"allow": ["shell", "kind:write"],
                                               "deny": ["list_dir", "telegram_react"]}})
    assert _names("trusted", policy=policy, extra=False) == {
        "shell", "write_file", "write_diff", "read_file"}
    assert _names("master", policy=policy, extra=False) == MACHINE_AND_WRITES | {"telegram_react"}


def test_r5_2_deny_wins_and_applies_to_the_master_too() -> None:
    policy = ToolPolicy.from_dict({"master": {"allow": ["*"], "deny": ["kind:machine"]}})
    assert "shell" not in _names("master", policy=policy)
    assert "write_file" in _names("master", policy=policy)


def test_r5_2_environment_gates_telegram_and_client_ops() -> None:
    plain = frozenset({"master"})
    assert "telegram_react" not in _names("master", plain)
    assert "client_open_url" not in _names("master", plain)
    assert "telegram_react" in _names("master", plain | {"telegram"})
    assert "client_open_url" in _names("guest", frozenset({"client_ops"}))
    everything = ToolPolicy.from_dict({"master": {"allow": ["*"]}})
    assert "telegram_react" not in _names("master", plain, everything)


@pytest.mark.parametrize(("table", "message"), [
    ({"admin": {"allow": []}}, "unknown role"),
    ({"trusted": {"permit": []}}, "allow/deny"),
    ({"trusted": {"allow": "shell"}}, "list of names"),
    ({"trusted": {"allow": ["kind:nuclear"]}}, "unknown kind"),
    ({"trusted": {"allow": ["bad name"]}}, "not a tool name"),
])
def test_r5_2_malformed_policy_is_refused(table, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        ToolPolicy.from_dict(table)


def test_r5_2_table_lists_what_each_role_may_get() -> None:
    table = default_registry().table(ToolPolicy())
    assert table["guest"] == ["telegram_react"]
    assert table["trusted"] == ["read_file", "list_dir", "telegram_react"]
