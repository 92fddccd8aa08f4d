"""Stream rules and their firing records in the database: rows ↔ `Rule`, CRUD by name, the
rule-set version, seed meta, and the stats queries (R6.1, R6.10, R6.11).

Must not: validate input (evacore.rules does) or decide anything; it reads and writes rows.
Rows written around the API may hold bad data: reading never raises for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, case, delete, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import NotFound
from evacore.rules import Rule, RuleCounts
from evacore.store import direct
from evacore.store.tables import SeedMeta, StreamRule, StreamRuleStat, Tour, Variant

RULE_FIELDS = (
    "scope", "condition", "negate", "text", "mode", "repeat", "enabled", "seed_version",
    "seed_hash", "created_at", "updated_at",
)


@dataclass(frozen=True)
class BadRow:
    """A stored row that cannot even be read as a `Rule` (wrong types written around the API)."""

    name: str
    reason: str


def rule_of(row: StreamRule) -> Rule | BadRow:
    """The row as a `Rule`; values of a wrong type become a `BadRow` instead of an exception."""
    name = row.name if isinstance(row.name, str) else str(row.name)
    when = row.when if row.when is not None else []
    if not isinstance(when, list | tuple) or not all(isinstance(w, str) for w in when):
        return BadRow(name, f"when: {when!r} is not a list of flag names")
    if row.repeat is not None and not isinstance(row.repeat, str):
        return BadRow(name, f"repeat: {row.repeat!r} is not a string")
    try:
        return Rule(
            name=name,
            scope=row.scope,
            condition=row.condition if row.condition is not None else "",
            negate=bool(row.negate),
            when=tuple(when),
            text=row.text,
            mode=row.mode or "",
            repeat=row.repeat,
            enabled=row.enabled is not False,
            created_at=row.created_at,
            updated_at=row.updated_at,
            seed_version=row.seed_version,
            seed_hash=row.seed_hash,
        )
    except Exception as exc:  # noqa: BLE001 - bad data is skipped, never raised
        return BadRow(name, f"unreadable row: {exc}")


def _fill(row: StreamRule, rule: Rule) -> None:
    row.name = rule.name
    row.when = list(rule.when)
    for key in RULE_FIELDS:
        setattr(row, key, getattr(rule, key))


async def read_rules(session: AsyncSession) -> list[Rule | BadRow]:
    """Every stored rule in name order, bad rows included as `BadRow`."""
    rows = (await session.scalars(select(StreamRule).order_by(StreamRule.name))).all()
    return [rule_of(row) for row in rows]


async def list_rules(session: AsyncSession) -> list[Rule]:
    """Every stored rule that reads as a `Rule`, in name order."""
    return [r for r in await read_rules(session) if isinstance(r, Rule)]


async def _row(session: AsyncSession, name: str) -> StreamRule | None:
    return (await session.scalars(select(StreamRule).where(StreamRule.name == name))).first()


async def get_rule(session: AsyncSession, name: str) -> Rule:
    """The rule named `name`, or NotFound."""
    row = await _row(session, name)
    rule = rule_of(row) if row is not None else None
    if not isinstance(rule, Rule):
        raise NotFound(f"no stream rule named {name!r}")
    return rule


async def rule_names(session: AsyncSession) -> set[str]:
    return set((await session.scalars(select(StreamRule.name))).all())


async def insert_rule(session: AsyncSession, rule: Rule) -> None:
    row = StreamRule()
    _fill(row, rule)
    session.add(row)
    await session.flush()


async def replace_rule(session: AsyncSession, rule: Rule) -> None:
    """Overwrite the stored rule of the same name with `rule` (all fields, timestamps too)."""
    row = await _row(session, rule.name)
    if row is None:
        raise NotFound(f"no stream rule named {rule.name!r}")
    _fill(row, rule)
    await session.flush()


async def delete_rule(session: AsyncSession, name: str) -> None:
    """Delete the rule; its `stream_rule_stat` records stay (records outlive their rule)."""
    result = await session.execute(delete(StreamRule).where(StreamRule.name == name))
    if not result.rowcount:
        raise NotFound(f"no stream rule named {name!r}")


_VERSION = select(func.count(StreamRule.id).label("n"),
                  func.max(StreamRule.updated_at).label("newest"))
"""Built once, as the other statements a tour start runs."""


@cache
def _records_statement(names: int) -> Select[Any]:
    """The newest firing turn per named rule in one chat, one parameter per name."""
    return (select(StreamRuleStat.rule.label("rule"), func.max(StreamRuleStat.turn).label("turn"))
            .where(StreamRuleStat.rule.in_([bindparam(f"p_rule_{i}") for i in range(names)]),
                   StreamRuleStat.chat_id == bindparam("p_chat_id"))
            .group_by(StreamRuleStat.rule))


@cache
def _version_and_records_statement(names: int) -> Select[Any]:
    version, records = _VERSION.subquery(), _records_statement(names).subquery()
    return select(version.c.n, version.c.newest, records.c.rule, records.c.turn).select_from(
        version.outerjoin(records, true()))


def _records_params(chat_id: str, names: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {f"p_rule_{i}": name for i, name in enumerate(names)}
    params["p_chat_id"] = chat_id
    return params


async def rules_version(session: AsyncSession) -> tuple[int, str | None]:
    """A cheap fingerprint of the stored rules: (count, newest `updated_at`). Every write through
    this module changes it, so a cached rule set is rebuilt only when it differs."""
    count, newest = (await direct.execute(session, _VERSION, {}))[0]
    return int(count or 0), _stamp(newest)


async def version_and_records(
    session: AsyncSession, chat_id: str, names: Sequence[str]
) -> tuple[tuple[int, str | None], list[tuple[str, int]]]:
    """`rules_version` and `repeat_records` in one statement: a tour's rules load costs one round
    trip to the database."""
    if not names:
        return await rules_version(session), []
    rows = await direct.execute(session, _version_and_records_statement(len(names)),
                                _records_params(chat_id, names))
    found = [(rule, int(turn or 0)) for _, _, rule, turn in rows if rule is not None]
    return (int(rows[0][0] or 0), _stamp(rows[0][1])), found


def _stamp(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


async def get_seed_meta(session: AsyncSession, key: str) -> dict[str, Any] | None:
    row = await session.get(SeedMeta, key)
    if row is None or not isinstance(row.value, dict):
        return None
    return dict(row.value)


async def put_seed_meta(session: AsyncSession, key: str, value: dict[str, Any]) -> None:
    row = await session.get(SeedMeta, key)
    if row is None:
        session.add(SeedMeta(key=key, value=value))
    else:
        row.value = value
    await session.flush()


async def add_stats(session: AsyncSession, rows: Iterable[dict[str, Any]]) -> int:
    """Insert `stream_rule_stat` rows (the shape of `evacore.rules.stat_row`)."""
    count = 0
    for values in rows:
        session.add(StreamRuleStat(**values))
        count += 1
    if count:
        await session.flush()
    return count


async def rule_counts(session: AsyncSession) -> dict[str, RuleCounts]:
    """Per rule name with records: how often it fired and how many firings cost a retry."""
    retried = func.sum(case((StreamRuleStat.retry.is_(True), 1), else_=0))
    result = await session.execute(
        select(StreamRuleStat.rule, func.count(StreamRuleStat.id), retried).group_by(
            StreamRuleStat.rule
        )
    )
    return {rule: RuleCounts(int(fired), int(again or 0)) for rule, fired, again in result.all()}


async def repeat_records(
    session: AsyncSession, chat_id: str, names: Sequence[str]
) -> list[tuple[str, int]]:
    """(rule, turn) of this chat's firings of the named rules: the input of `RepeatState`."""
    if not names:
        return []
    rows = await direct.execute(session, _records_statement(len(names)),
                                _records_params(chat_id, names))
    return [(rule, int(turn or 0)) for rule, turn in rows]


async def firings_of_tour(session: AsyncSession, tour_id: str) -> list[dict[str, Any]]:
    """The stat rows of one tour, oldest first."""
    rows = (
        await session.scalars(
            select(StreamRuleStat)
            .where(StreamRuleStat.tour_id == tour_id)
            .order_by(StreamRuleStat.created_at)
        )
    ).all()
    return [
        {"rule": r.rule, "chat_id": r.chat_id, "tour_id": r.tour_id, "turn": r.turn,
         "scope": r.scope, "retry": r.retry, "created_at": _stamp(r.created_at)}
        for r in rows
    ]


async def tour_counts(session: AsyncSession) -> dict[str, int]:
    """Tours by status."""
    result = await session.execute(select(Tour.status, func.count(Tour.id)).group_by(Tour.status))
    return {status: int(n) for status, n in result.all()}


async def token_totals(session: AsyncSession) -> dict[str, int]:
    """Prompt and completion tokens summed over every stored variant's usage."""
    prompt = Variant.usage["prompt_tokens"].as_integer()
    completion = Variant.usage["completion_tokens"].as_integer()
    total_prompt, total_completion = (
        await session.execute(
            select(func.coalesce(func.sum(prompt), 0), func.coalesce(func.sum(completion), 0))
        )
    ).one()
    return {"prompt": int(total_prompt), "completion": int(total_completion)}
