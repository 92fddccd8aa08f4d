"""R2 issue: structured JSON logs when not on a terminal; every line of a tour carries its id."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from evacore.logs import configure_logging


async def test_logs_are_json_and_tour_lines_carry_the_tour_id(
    client: httpx.AsyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json", "INFO")
    try:
        chat = (await client.post("/v1/chats", json={})).json()
        r = await client.post(f"/v1/chats/{chat['id']}/generate",
                              json={"message": {"content": "log me"}, "stream": False})
        tour_id = r.json()["tour_id"]
        err = capsys.readouterr().err
    finally:
        root = logging.getLogger()
        for h in list(root.handlers):
            if getattr(h, "_evacore", False):
                root.removeHandler(h)
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    tour_lines = [rec for rec in lines if str(rec.get("event", "")).startswith("tour.")]
    assert tour_lines, err[-2000:]
    assert all(rec.get("tour_id") == tour_id for rec in tour_lines)
    assert all(rec.get("chat_id") == chat["id"] for rec in tour_lines)
