"""Stream rules (R6): rule data and validation, the per-tour engine, seeds and calibration.

Must not: hold code of its own; it re-exports the package's public names.
"""

from evacore.rules.calibration import SEED_META_KEY, Left, SeedPlan, StoredRuleState, plan_seeding
from evacore.rules.corpus import Sample, Score, measure, parse_corpus, report_lines, shipped_corpus
from evacore.rules.engine import (
    INTERRUPT_TAIL,
    AnswerVerdict,
    CompiledRule,
    Firing,
    RepeatState,
    RuleSet,
    TourRules,
    env_flags,
    insert_reminders,
    interrupt_message,
    reminder_block,
)
from evacore.rules.model import (
    Rule,
    RuleInput,
    RulePatch,
    apply_patch,
    content_hash,
    rule_to_json,
    validate_rule,
)
from evacore.rules.probe import ProbeResult, probe_rule
from evacore.rules.seeds import SEED_VERSION, SEEDS, seed_rules
from evacore.rules.target import canonical_arguments
from evacore.rules.telemetry import FIRED_TOTAL, RuleCounts, rules_stats, stat_row

__all__ = [
    "FIRED_TOTAL",
    "INTERRUPT_TAIL",
    "SEEDS",
    "SEED_META_KEY",
    "SEED_VERSION",
    "AnswerVerdict",
    "CompiledRule",
    "Firing",
    "Left",
    "ProbeResult",
    "RepeatState",
    "Rule",
    "RuleCounts",
    "RuleInput",
    "RulePatch",
    "RuleSet",
    "Sample",
    "Score",
    "SeedPlan",
    "StoredRuleState",
    "TourRules",
    "apply_patch",
    "canonical_arguments",
    "content_hash",
    "env_flags",
    "insert_reminders",
    "interrupt_message",
    "measure",
    "parse_corpus",
    "plan_seeding",
    "probe_rule",
    "reminder_block",
    "report_lines",
    "rule_to_json",
    "rules_stats",
    "seed_rules",
    "shipped_corpus",
    "stat_row",
    "validate_rule",
]
