"""A firing is never silent (R6.11): its log line, its Prometheus counter, the shape of its
`stream_rule_stat` row and the `rules` field of `GET /v1/stats`.

Must not: write to the database; the store persists what `stat_row` returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

if TYPE_CHECKING:
    from evacore.rules.engine import Firing

FIRED_TOTAL = Counter(
    "evacore_stream_rule_fired",
    "Stream rule firings, by rule, scope and whether the answer was rewritten.",
    ["rule", "scope", "retry"],
)
"""Exposed as `evacore_stream_rule_fired_total{rule, scope, retry}`."""

TOOL_EVENT = "stream rule fired"
ANSWER_EVENT = "stream rule fired on the answer"


def note_firing(firing: Firing, *, log: Any, fields: Mapping[str, Any] | None = None) -> None:
    """Log the firing (with `chat_id`/`tour_id` from `fields` or the bound context) and count it."""
    extra = dict(fields or {})
    if firing.kind == "answer":
        log.info(
            ANSWER_EVENT,
            rule=firing.rule,
            scope=firing.scope,
            turn=firing.turn,
            retry=firing.retry,
            **extra,
        )
    else:
        log.info(
            TOOL_EVENT,
            rule=firing.rule,
            scope=firing.scope,
            turn=firing.turn,
            tool=firing.tool,
            **extra,
        )
    FIRED_TOTAL.labels(rule=firing.rule, scope=firing.scope, retry=str(firing.retry).lower()).inc()


def stat_row(firing: Firing, *, chat_id: str | None, tour_id: str | None) -> dict[str, Any]:
    """The `stream_rule_stat` row of a firing (column names of the table)."""
    return {
        "rule": firing.rule,
        "chat_id": chat_id,
        "tour_id": tour_id,
        "turn": firing.turn,
        "scope": firing.scope,
        "retry": firing.retry,
        "created_at": firing.at,
    }


@dataclass(frozen=True)
class RuleCounts:
    """Totals over a rule's `stream_rule_stat` rows."""

    fired: int = 0
    retried: int = 0


def rules_stats(
    current: Iterable[str], counts: Mapping[str, RuleCounts | int]
) -> list[dict[str, Any]]:
    """The `rules` field of GET /v1/stats: every current rule (zero is an answer too) and every
    rule that has records (records outlive their rule), sorted by name; `current` is False for
    a rule that no longer exists."""
    present = set(current)
    names = present | set(counts)
    out = []
    for name in sorted(names):
        count = counts.get(name, RuleCounts())
        if isinstance(count, int):
            count = RuleCounts(fired=count)
        out.append(
            {
                "rule": name,
                "fired": count.fired,
                "retried": count.retried,
                "current": name in present,
            }
        )
    return out
