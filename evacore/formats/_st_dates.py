"""Parse the date forms found in SillyTavern and TavernAI chats; write them as SillyTavern
does (`send_date` "June 19, 2023 2:20pm", `create_date` "2023-06-19@14h20m33s", both in
local time; `gen_started`/`gen_finished` ISO 8601).

Must not: raise on a date it cannot read (callers keep the raw value instead). The forms
SillyTavern writes in local time are read and written in this machine's local time zone
(SillyTavern writes the browser's; the files do not say which).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

_MONTHS = {
    name: index + 1
    for index, names in enumerate(
        ("jan january", "feb february", "mar march", "apr april", "may", "jun june",
         "jul july", "aug august", "sep sept september", "oct october", "nov november",
         "dec december")
    )
    for name in names.split()
}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LONG = re.compile(
    r"(?P<month>[a-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4})"
    r"(?:,?\s+(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?\s*(?P<ampm>[ap])\.?m\.?)?",
    re.IGNORECASE,
)
_HUMANIZED = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\s*@\s*(?P<h>\d{1,2})h\s*"
    r"(?P<m>\d{1,2})m\s*(?P<s>\d{1,2})s(?:\s*(?P<ms>\d{1,3})\s*ms)?",
    re.IGNORECASE,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _from_number(number: float) -> datetime | None:
    if not math.isfinite(number):
        return None
    millis = number if abs(number) >= 1e11 else number * 1000
    try:
        return _EPOCH + timedelta(milliseconds=millis)
    except OverflowError:
        return None


def _from_long(match: re.Match[str]) -> datetime | None:
    month = _MONTHS.get(match["month"].lower())
    if month is None:
        return None
    hour = int(match["h"] or 0)
    if match["ampm"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match["ampm"].lower() == "p" else 0)
    return _local(datetime(int(match["year"]), month, int(match["day"]), hour,
                           int(match["m"] or 0), int(match["s"] or 0)))


def _from_humanized(match: re.Match[str]) -> datetime:
    return _local(datetime(int(match["year"]), int(match["month"]), int(match["day"]),
                           int(match["h"]), int(match["m"]), int(match["s"]),
                           int(match["ms"] or 0) * 1000))


def _local(naive: datetime) -> datetime:
    """A wall-clock time SillyTavern wrote in local time, as an aware UTC datetime."""
    return naive.astimezone().astimezone(UTC)


def parse_st_date(value: Any) -> datetime | None:
    """A timezone-aware UTC datetime, or None. ISO forms without a zone are taken as UTC;
    the long and humanized forms (SillyTavern's local-time ones) as local time.

    Accepts unix milliseconds (or seconds below 1e11) as a number or numeric string,
    ISO 8601, "January 8, 2023 11:39am" and "2024-9-28 @17h 12m 33s 120ms".
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _from_number(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _NUMBER.fullmatch(text):
            return _from_number(float(text))
        if match := _HUMANIZED.fullmatch(text):
            return _from_humanized(match)
        if match := _LONG.fullmatch(text):
            return _from_long(match)
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")


def format_send_date(moment: datetime) -> str:
    """SillyTavern's `send_date`: "June 19, 2023 2:20pm" in local time."""
    local = _aware(moment).astimezone()
    hour = local.hour % 12 or 12
    meridiem = "pm" if local.hour >= 12 else "am"
    return (f"{_MONTH_NAMES[local.month - 1]} {local.day}, {local.year} "
            f"{hour}:{local.minute:02d}{meridiem}")


def format_create_date(moment: datetime) -> str:
    """SillyTavern's `create_date`: "2023-06-19@14h20m33s" in local time."""
    local = _aware(moment).astimezone()
    return (f"{local.year:04d}-{local.month:02d}-{local.day:02d}@{local.hour:02d}h"
            f"{local.minute:02d}m{local.second:02d}s")


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def format_iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a `Z`, e.g. 2024-09-28T17:12:33.120Z."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")
