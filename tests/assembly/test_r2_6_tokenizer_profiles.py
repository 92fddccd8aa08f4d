"""R2.6: tokenizer profiles through tours: the connection's profile counts the prompt, a bad
spec is refused at creation, a spec that stops loading falls back to the heuristic visibly."""

from __future__ import annotations

import math

import httpx
from sqlalchemy import update

from evacore.core import Core
from evacore.store.tables import Connection
from evacore.tokenize import get_profile
from tests.assembly._helpers import chat, connection, send, tour

SHORT = "hi"
LONG = "hi" + " hello" * 100  # o200k: " hello" is one token, so exactly 100 more


async def _prompt_tokens(client: httpx.AsyncClient, conn: str, text: str) -> dict:
    answer = await send(client, await chat(client, conn), text)
    return dict((await tour(client, answer["tour_id"]))["diagnostics"]["tokens"])


async def test_r2_6_tiktoken_profile_counts_the_prompt(client: httpx.AsyncClient) -> None:
    conn = await connection(client, tokenizer="tiktoken:o200k_base")
    short, long = (await _prompt_tokens(client, conn, SHORT),
                   await _prompt_tokens(client, conn, LONG))
    assert short["profile"] == long["profile"] == "tiktoken:o200k_base"
    assert long["prompt"] - short["prompt"] == 100
    assert "warning" not in long


async def test_r2_6_heuristic_profile_counts_the_prompt(client: httpx.AsyncClient) -> None:
    conn = await connection(client, tokenizer="heuristic")
    short, long = (await _prompt_tokens(client, conn, SHORT),
                   await _prompt_tokens(client, conn, LONG))
    assert short["profile"] == long["profile"] == "heuristic"
    heuristic = get_profile("heuristic")
    # ceil(chars / 3.35) with its safety margin: the 600 added characters cost at least
    # 600 / 3.35 tokens, far more than the 100 exact ones
    assert long["prompt"] - short["prompt"] == heuristic.count(LONG) - heuristic.count(SHORT)
    assert long["prompt"] - short["prompt"] >= math.ceil(600 / 3.35)


async def test_r2_6_bad_tokenizer_spec_is_refused(client: httpx.AsyncClient) -> None:
    for spec in ("bogus", "tiktoken:", "hf:", "o200k_base"):
        r = await client.post("/v1/connections", json={"name": "t", "kind": "mock",
                                                        "tokenizer": spec})
        assert r.status_code == 422, (spec, r.text)
        assert r.json()["error"]["code"] == "invalid_input"
    conn = await connection(client, tokenizer="heuristic")
    r = await client.patch(f"/v1/connections/{conn}", json={"tokenizer": "bogus"})
    assert r.status_code == 422, r.text
    assert (await client.get(f"/v1/connections/{conn}")).json()["tokenizer"] == "heuristic"


async def test_r2_6_unloadable_tokenizer_falls_back_with_warning(client: httpx.AsyncClient,
                                                                 core: Core) -> None:
    # a spec that was accepted once but cannot load now (e.g. an encoding this build lacks)
    conn = await connection(client, tokenizer="tiktoken:o200k_base")
    async with core.session() as s:
        await s.execute(update(Connection).where(Connection.id == conn)
                        .values(tokenizer="tiktoken:p999k_future"))
    tokens = await _prompt_tokens(client, conn, LONG)
    assert tokens["profile"] == "heuristic"
    assert "tiktoken:p999k_future" in tokens["warning"] and "heuristic" in tokens["warning"]
    short = await _prompt_tokens(client, conn, SHORT)
    heuristic = get_profile("heuristic")
    assert tokens["prompt"] - short["prompt"] == heuristic.count(LONG) - heuristic.count(SHORT)
