"""Bad input never gets a 500: numbers too large for the database are refused as invalid
input (query bounds, and a safety net for any other route), with the error body."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from evacore.server.errors import install_error_handlers


@pytest.mark.parametrize("path", [
    "/v1/chats?offset=99999999999999999999",
    "/v1/chats?offset=9223372036854775808",
    "/v1/characters?offset=99999999999999999999",
    "/v1/personas?offset=99999999999999999999",
])
async def test_r8_huge_offsets_are_invalid_input(client: httpx.AsyncClient, path: str) -> None:
    r = await client.get(path)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_input"


async def test_r8_a_number_past_64_bits_anywhere_is_invalid_input() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/store")
    async def store() -> None:
        import sqlite3

        sqlite3.connect(":memory:").execute("SELECT ?", (2**70,))

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as c:
        r = await c.get("/store")
    assert r.status_code == 422
    assert r.json() == {"error": {"code": "invalid_input",
                                  "message": "a number in the request is out of range"}}
