"""Stream rules in the running core: seeding at start, the shared compiled rule set (rebuilt
when the stored rules change, on any instance), each tour's `TourRules`, the firing records
written with the tour, and the CRUD / probe / stats operations every surface shares (R6.9).

Must not: speak HTTP, print, or judge answers itself; the engine decides, the store persists.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy.exc import IntegrityError

from evacore.errors import Conflict, RuleInvalid
from evacore.rules import (
    SEED_META_KEY,
    ProbeResult,
    Rule,
    SeedPlan,
    StoredRuleState,
    apply_patch,
    plan_seeding,
    probe_rule,
    rules_stats,
    validate_rule,
)
from evacore.services.tour_rules import note_change
from evacore.store import rules as store

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.store.db import Database

_log = structlog.get_logger("evacore.rules")
SEED_ATTEMPTS = 3


# --- operations shared by the HTTP API, the CLI and the model's tools ---------------------------


async def list_rules(session: AsyncSession) -> list[Rule]:
    return await store.list_rules(session)


async def create_rule(session: AsyncSession, data: Any) -> Rule:
    """Validate and store a new rule: RuleInvalid (422) or Conflict (409) change nothing."""
    rule = validate_rule(data, existing_names=await store.rule_names(session))
    try:
        await store.insert_rule(session, rule)
    except IntegrityError:  # a concurrent create of the same name won the race; rolled back
        raise Conflict(f"a rule named {rule.name!r} already exists", name=rule.name) from None
    note_change(session)
    return rule


async def edit_rule(session: AsyncSession, name: str, patch: Any) -> Rule:
    """Apply a partial edit, re-validated as a whole; an edit that changes nothing writes nothing."""
    rule = await store.get_rule(session, name)
    updated = apply_patch(rule, patch)
    if updated is not rule:
        await store.replace_rule(session, updated)
        note_change(session)
    return updated


async def delete_rule(session: AsyncSession, name: str) -> None:
    await store.delete_rule(session, name)
    note_change(session)


async def probe(
    session: AsyncSession,
    *,
    name: str | None = None,
    rule: Any = None,
    text: str | None = None,
    tool: str | None = None,
    arguments: str = "{}",
    env: Mapping[str, bool] | Iterable[str] | None = None,
) -> tuple[Rule, ProbeResult]:
    """"Would it fire?" for a stored rule (`name`) or an unsaved one (`rule`, validated)."""
    if (name is None) == (rule is None):
        raise RuleInvalid("give either the name of a stored rule or a rule to try")
    target = await store.get_rule(session, name) if name is not None else validate_rule(rule)
    return target, probe_rule(target, text=text, tool=tool, arguments=arguments, env=env)


async def rules_field(session: AsyncSession) -> list[dict[str, Any]]:
    """The `rules` field of GET /v1/stats (R6.11): every current rule and every recorded one."""
    current = [r.name for r in await store.read_rules(session)]
    return rules_stats(current, await store.rule_counts(session))


async def stats(session: AsyncSession, plugins: Any = None) -> dict[str, Any]:
    """The whole GET /v1/stats body."""
    out: dict[str, Any] = {
        "rules": await rules_field(session),
        "tours": await store.tour_counts(session),
        "tokens": await store.token_totals(session),
    }
    failures = plugin_failures(plugins)
    if failures is not None:
        out["plugins"] = failures
    return out


def plugin_failures(plugins: Any) -> dict[str, Any] | None:
    """Failure counters from the plugin host's state snapshot, when it offers one."""
    for owner in (plugins, getattr(plugins, "manager", None)):
        snapshot = getattr(owner, "state_snapshot", None)
        if callable(snapshot):
            try:
                states = snapshot()
            except Exception:  # noqa: BLE001 - stats never fail because of a plugin
                return None
            by_plugin = {
                str(name): {"failures": int(st.get("failures") or 0),
                            "last_error": st.get("last_error")}
                for name, st in dict(states).items() if isinstance(st, Mapping)
            }
            total = sum(p["failures"] for p in by_plugin.values())
            return {"failures": total, "by_plugin": by_plugin}
    return None


# --- seeding and calibration (R6.10) -------------------------------------------------------------


async def run_seeding(db: Database, seeds: Iterable[Rule] | None = None) -> SeedPlan:
    """Apply this release's seeding / calibration wave in one transaction. Idempotent; when
    several instances start at once, the loser of the race retries and finds nothing to do."""
    for attempt in range(SEED_ATTEMPTS):
        try:
            async with db.session() as s:
                stored = [_state_of(r) for r in await store.read_rules(s)]
                meta = await store.get_seed_meta(s, SEED_META_KEY)
                kwargs = {} if seeds is None else {"seeds": tuple(seeds)}
                plan = plan_seeding(stored, meta, **kwargs)
                for rule in plan.create:
                    await store.insert_rule(s, rule)
                for rule in plan.rewrite:
                    await store.replace_rule(s, rule)
                if plan.meta_changed:
                    await store.put_seed_meta(s, SEED_META_KEY, plan.new_meta)
        except IntegrityError:
            if attempt == SEED_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
            continue
        if plan.create or plan.rewrite:
            kept = {left.name: left.reason for left in plan.leave if left.reason != "current"}
            _log.info("stream rules seeded", version=plan.new_meta.get("version"),
                      created=[r.name for r in plan.create],
                      rewritten=[r.name for r in plan.rewrite], left=kept)
        return plan
    raise AssertionError("unreachable")


def _state_of(row: Rule | store.BadRow) -> StoredRuleState:
    if isinstance(row, Rule):
        try:
            return StoredRuleState.from_rule(row)
        except Exception:  # noqa: BLE001 - unhashable bad data: treat as the master's own
            _log.warning("stream rule unreadable for seeding", rule=row.name, exc_info=True)
    return StoredRuleState(name=row.name, enabled=True, seed_hash=None, seed_version=None,
                           current_hash="")
