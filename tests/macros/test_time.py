"""R2.2: time and date macros use the tour's clock and moment.js formats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from evacore.macros import MacroEngine, MacroEnv
from evacore.macros.timefmt import format_moment, humanize

NOW = datetime(2026, 11, 30, 15, 5, 9, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{time}}", "3:05 PM"),
        ("{{date}}", "November 30, 2026"),
        ("{{weekday}}", "Monday"),
        ("{{isotime}}", "15:05"),
        ("{{isodate}}", "2026-11-30"),
        ("{{datetimeformat::DD.MM.YYYY HH:mm:ss}}", "30.11.2026 15:05:09"),
        ("{{datetimeformat dddd, Do MMM [at] h A}}", "Monday, 30th Nov at 3 PM"),
        ("{{time_UTC+2}}", "5:05 PM"),
        ("{{time_UTC-10}}", "5:05 AM"),
        ("{{time::UTC+5.5}}", "8:35 PM"),
        ("{{time::UTC}}", "3:05 PM"),
        ("{{timeDiff::2026-11-30T12:00:00::2026-11-30T10:00:00}}", "in 2 hours"),
        ("{{timeDiff::2026-11-10::2026-11-30}}", "20 days ago"),
        ("{{timeDiff::2026-11-01::2026-11-30}}", "a month ago"),
        ("{{timeDiff::nonsense::2026-11-30}}", ""),
        ("{{idle_duration}}", "3 hours"),
    ],
)
def test_r2_2_time_macros(engine: MacroEngine, text: str, expected: str) -> None:
    env = MacroEnv(now=NOW, idle_since=NOW - timedelta(hours=3))
    assert engine.evaluate(text, env) == expected


def test_r2_2_idle_duration_without_user_message(engine: MacroEngine) -> None:
    assert engine.evaluate("{{idle_duration}}", MacroEnv(now=NOW)) == "just now"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=30), "a few seconds"),
        (timedelta(seconds=60), "a minute"),
        (timedelta(minutes=10), "10 minutes"),
        (timedelta(minutes=50), "an hour"),
        (timedelta(hours=5), "5 hours"),
        (timedelta(hours=30), "a day"),
        (timedelta(days=10), "10 days"),
        (timedelta(days=40), "a month"),
        (timedelta(days=100), "3 months"),
        (timedelta(days=400), "a year"),
        (timedelta(days=1000), "3 years"),
    ],
)
def test_r2_2_humanize_thresholds(delta: timedelta, text: str) -> None:
    assert humanize(delta) == text
    assert humanize(-delta, with_suffix=True) == f"{text} ago"


def test_r2_2_moment_tokens() -> None:
    dt = datetime(2026, 1, 4, 0, 7, 3, 45000, tzinfo=timezone(timedelta(hours=3)))
    assert format_moment(dt, "YY Q M Mo D DDD d dd E W hh kk A a SSS Z ZZ") == (
        "26 1 1 1st 4 4 0 Su 7 1 12 24 AM am 045 +03:00 +0300"
    )
    assert format_moment(dt, "LLLL") == "Sunday, January 4, 2026 12:07 AM"
    assert format_moment(dt, "X") == str(int(dt.timestamp()))
