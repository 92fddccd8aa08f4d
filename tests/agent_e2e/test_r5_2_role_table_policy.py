"""R5.2: an operator's `agent.tool_policy` changes the role table of running tours, within
the limits that always hold (guests never get file or shell tools)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.agent_e2e.test_r5_2_role_table import FILES_AND_SHELL, offered


@pytest.fixture
def agent_settings() -> dict[str, Any]:
    return {"tool_policy": {
        "trusted": {"allow": ["shell"], "deny": ["list_dir"]},
        "master": {"deny": ["kind:write"]},
        "guest": {"allow": ["*"]},
    }}


async def test_r5_2_trusted_and_master_follow_an_overridden_table(
        client: httpx.AsyncClient) -> None:
    trusted = await offered(client, "trusted")
    assert {"shell", "read_file"} <= trusted
    assert not trusted & {"list_dir", "write_file", "write_diff"}
    master = await offered(client, None)
    assert {"shell", "read_file", "list_dir"} <= master
    assert not master & {"write_file", "write_diff"}
    assert not await offered(client, "guest") & FILES_AND_SHELL
