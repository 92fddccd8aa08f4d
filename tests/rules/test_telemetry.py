"""R6.11: firing records and the `rules` field of GET /v1/stats."""

from __future__ import annotations

from datetime import UTC, datetime

from evacore.rules import Firing, RuleCounts, rules_stats, stat_row


def test_r6_11_stats_list_every_current_rule_and_every_rule_with_records() -> None:
    stats = rules_stats(
        ["local_shell_for_his_machine", "telegram_reply_tail"],
        {"telegram_reply_tail": RuleCounts(fired=3, retried=2), "deleted_rule": 4},
    )
    assert stats == [
        {"rule": "deleted_rule", "fired": 4, "retried": 0, "current": False},
        {"rule": "local_shell_for_his_machine", "fired": 0, "retried": 0, "current": True},
        {"rule": "telegram_reply_tail", "fired": 3, "retried": 2, "current": True},
    ]


def test_r6_11_stat_row_has_the_table_columns() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    firing = Firing(rule="r", scope="text", kind="answer", retry=True, turn=7, text="t", at=at)
    assert stat_row(firing, chat_id="c", tour_id="t") == {
        "rule": "r",
        "chat_id": "c",
        "tour_id": "t",
        "turn": 7,
        "scope": "text",
        "retry": True,
        "created_at": at,
    }
