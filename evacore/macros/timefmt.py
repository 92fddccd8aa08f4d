"""Time and date macros: moment.js-style formats (English locale) and humanised durations.

Must not: read the system clock; the tour's `env.now` is the only time source.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import structlog

from evacore.macros.env import MacroEnv

if TYPE_CHECKING:
    from evacore.macros.engine import MacroEngine

log = structlog.get_logger(__name__)

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_LONG_FORMATS = {
    "LTS": "h:mm:ss A",
    "LT": "h:mm A",
    "LLLL": "dddd, MMMM D, YYYY h:mm A",
    "LLL": "MMMM D, YYYY h:mm A",
    "LL": "MMMM D, YYYY",
    "L": "MM/DD/YYYY",
    "llll": "ddd, MMM D, YYYY h:mm A",
    "lll": "MMM D, YYYY h:mm A",
    "ll": "MMM D, YYYY",
    "l": "M/D/YYYY",
}
_TOKENS = re.compile(
    r"\[[^\]]*\]|LTS|LT|LLLL|LLL|LL|L|llll|lll|ll|l|YYYY|YY|Y|Qo|Q|MMMM|MMM|MM|Mo|M|"
    r"DDDD|DDDo|DDD|DD|Do|D|dddd|ddd|dd|do|d|E|e|WW|Wo|W|ww|wo|w|HH|H|hh|h|kk|k|"
    r"mm|m|ss|s|SSS|SS|S|A|a|ZZ|Z|X|x"
)


def ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}" + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _offset(dt: datetime, sep: str) -> str:
    delta = dt.utcoffset() or timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{sep}{mins:02d}"


def _token(dt: datetime, tok: str) -> str:
    if tok.startswith("["):
        return tok[1:-1]
    if tok in _LONG_FORMATS:
        return format_moment(dt, _LONG_FORMATS[tok])
    weekday = (dt.weekday() + 1) % 7  # Sunday = 0
    hour12 = dt.hour % 12 or 12
    iso_week = dt.isocalendar()[1]
    # US locale week: the week containing Jan 1 is week 1, weeks start on Sunday
    jan1 = dt.replace(month=1, day=1)
    locale_week = (dt.timetuple().tm_yday + (jan1.weekday() + 1) % 7 - 1) // 7 + 1
    quarter = (dt.month - 1) // 3 + 1
    table: dict[str, object] = {
        "YYYY": f"{dt.year:04d}",
        "YY": f"{dt.year % 100:02d}",
        "Y": dt.year,
        "Q": quarter,
        "Qo": ordinal(quarter),
        "MMMM": _MONTHS[dt.month - 1],
        "MMM": _MONTHS[dt.month - 1][:3],
        "MM": f"{dt.month:02d}",
        "Mo": ordinal(dt.month),
        "M": dt.month,
        "DDDD": f"{dt.timetuple().tm_yday:03d}",
        "DDDo": ordinal(dt.timetuple().tm_yday),
        "DDD": dt.timetuple().tm_yday,
        "DD": f"{dt.day:02d}",
        "Do": ordinal(dt.day),
        "D": dt.day,
        "dddd": _DAYS[weekday],
        "ddd": _DAYS[weekday][:3],
        "dd": _DAYS[weekday][:2],
        "do": ordinal(weekday),
        "d": weekday,
        "e": weekday,
        "E": dt.isoweekday(),
        "WW": f"{iso_week:02d}",
        "Wo": ordinal(iso_week),
        "W": iso_week,
        "ww": f"{locale_week:02d}",
        "wo": ordinal(locale_week),
        "w": locale_week,
        "HH": f"{dt.hour:02d}",
        "H": dt.hour,
        "hh": f"{hour12:02d}",
        "h": hour12,
        "kk": f"{dt.hour or 24:02d}",
        "k": dt.hour or 24,
        "mm": f"{dt.minute:02d}",
        "m": dt.minute,
        "ss": f"{dt.second:02d}",
        "s": dt.second,
        "SSS": f"{dt.microsecond // 1000:03d}",
        "SS": f"{dt.microsecond // 10000:02d}",
        "S": dt.microsecond // 100000,
        "A": "AM" if dt.hour < 12 else "PM",
        "a": "am" if dt.hour < 12 else "pm",
        "ZZ": _offset(dt, ""),
        "Z": _offset(dt, ":"),
        "X": int(dt.timestamp()),
        "x": int(dt.timestamp() * 1000),
    }
    return str(table[tok])


def format_moment(dt: datetime, fmt: str) -> str:
    """Format like moment.js `format(fmt)` in the English locale."""
    return _TOKENS.sub(lambda m: _token(dt, m.group(0)), fmt)


def _js_round(x: float) -> int:
    return math.floor(x + 0.5)


def humanize(delta: timedelta, *, with_suffix: bool = False) -> str:
    """moment.js `duration.humanize()` with its default thresholds."""
    ms = delta.total_seconds() * 1000
    a = abs(ms)
    seconds = _js_round(a / 1000)
    minutes = _js_round(a / 60000)
    hours = _js_round(a / 3600000)
    days_exact = a / 86400000
    days = _js_round(days_exact)
    months = _js_round(days_exact * 4800 / 146097)
    years = _js_round(days_exact * 4800 / 146097 / 12)
    if seconds <= 44:
        text = "a few seconds"
    elif seconds < 45:
        text = f"{seconds} seconds"
    elif minutes <= 1:
        text = "a minute"
    elif minutes < 45:
        text = f"{minutes} minutes"
    elif hours <= 1:
        text = "an hour"
    elif hours < 22:
        text = f"{hours} hours"
    elif days <= 1:
        text = "a day"
    elif days < 26:
        text = f"{days} days"
    elif months <= 1:
        text = "a month"
    elif months < 11:
        text = f"{months} months"
    elif years <= 1:
        text = "a year"
    else:
        text = f"{years} years"
    if not with_suffix:
        return text
    return f"in {text}" if ms > 0 else f"{text} ago"


def _parse_date(text: str, env: MacroEnv) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None and env.now.tzinfo is not None:
        parsed = parsed.replace(tzinfo=env.now.tzinfo)
    if parsed.tzinfo is not None and env.now.tzinfo is None:
        parsed = parsed.replace(tzinfo=None)
    return parsed


def _utc_shift(env: MacroEnv, spec: str) -> datetime | None:
    match = re.fullmatch(r"\s*UTC\s*([+-]\d+(?:\.\d+)?)?\s*", spec, re.IGNORECASE)
    if match is None:
        return None
    hours = float(match.group(1) or 0)
    if abs(hours) >= 16:  # moment reads large numbers as minutes
        hours = hours / 60
    now = env.now if env.now.tzinfo else env.now.astimezone()
    return now.astimezone(timezone(timedelta(hours=hours)))


def time_macro(env: MacroEnv, spec: str = "") -> str:
    if not spec:
        return format_moment(env.now, "LT")
    shifted = _utc_shift(env, spec)
    return "" if shifted is None else format_moment(shifted, "LT")


def time_diff(env: MacroEnv, a: str, b: str) -> str:
    first, second = _parse_date(a, env), _parse_date(b, env)
    if first is None or second is None:
        log.warning("macro.time_diff_invalid_date")
        return ""
    return humanize(first - second, with_suffix=True)


def idle_duration(env: MacroEnv) -> str:
    if env.idle_since is None:
        return "just now"
    since = env.idle_since
    now = env.now
    if (since.tzinfo is None) != (now.tzinfo is None):
        since = since.replace(tzinfo=now.tzinfo)
    return humanize(now - since)


def register_time(engine: MacroEngine) -> None:
    reg = engine.register
    reg("time", time_macro, max_args=1,
        description="Current time, `h:mm A`; `{{time::UTC+2}}` (or `{{time_UTC+2}}`) at an offset.")
    reg("date", lambda env: format_moment(env.now, "LL"), max_args=0,
        description="Current date, `MMMM D, YYYY`.")
    reg("weekday", lambda env: format_moment(env.now, "dddd"), max_args=0,
        description="Current weekday name.")
    reg("isotime", lambda env: format_moment(env.now, "HH:mm"), max_args=0,
        description="Current time, `HH:mm`.")
    reg("isodate", lambda env: format_moment(env.now, "YYYY-MM-DD"), max_args=0,
        description="Current date, `YYYY-MM-DD`.")
    reg("datetimeformat", lambda env, fmt: format_moment(env.now, fmt), min_args=1, max_args=1,
        description="Current date/time in a moment.js format.")
    reg("timeDiff", time_diff, min_args=2, max_args=2,
        description="Humanised difference between two ISO dates, `in …` / `… ago`.")
    reg("idle_duration", idle_duration, max_args=0,
        description="Humanised time since the user's previous message; `just now` if none.")
