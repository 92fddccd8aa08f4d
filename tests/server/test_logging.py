"""R2 issue: structured JSON logs when not on a terminal; every line of a tour carries its id."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.logs import configure_logging
from tests.helpers import drop_evacore_logging


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
        drop_evacore_logging()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    tour_lines = [rec for rec in lines if str(rec.get("event", "")).startswith("tour.")]
    assert tour_lines, err[-2000:]
    assert all(rec.get("tour_id") == tour_id for rec in tour_lines)
    assert all(rec.get("chat_id") == chat["id"] for rec in tour_lines)


def test_a_line_below_the_level_is_dropped_before_it_is_stamped_or_redacted(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At WARNING an info line costs no time stamp and no redaction (a tour logs one per
    answer); a warning still goes out whole."""
    import structlog

    from evacore import logs

    configure_logging("json", "WARNING")
    stamped: list[str] = []
    stamper = structlog.processors.TimeStamper.__call__

    def counting(self: object, logger: object, name: str, event: dict) -> dict:  # type: ignore[type-arg]
        stamped.append(event["event"])
        return stamper(self, logger, name, event)  # type: ignore[arg-type]

    monkeypatch.setattr(structlog.processors.TimeStamper, "__call__", counting)
    try:
        log = logs.get_logger("evacore.test")
        log.info("quiet.line", secret="sk-abcdefghijkl")
        log.warning("loud.line")
        err = capsys.readouterr().err
    finally:
        drop_evacore_logging()
    assert "quiet.line" not in err and "loud.line" in err
    assert "quiet.line" not in stamped and "loud.line" in stamped
