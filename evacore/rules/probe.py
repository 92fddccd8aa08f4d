""" "Would it fire?" for one rule and one sample (CLI `evacore rules test`, the web rules editor).

Must not: touch tour state or telemetry; a probe fires nothing and ignores repeat policies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from evacore.rules.engine import CompiledRule, RuleSet, env_flags
from evacore.rules.model import Rule
from evacore.rules.target import canonical_arguments


@dataclass(frozen=True)
class ProbeResult:
    fires: bool
    reason: str
    """One human sentence: why it fires or why not."""
    target: str
    """What the regex was run on (the answer text, or the arguments as compact JSON)."""


def probe_rule(
    rule: Rule,
    *,
    text: str | None = None,
    tool: str | None = None,
    arguments: str = "{}",
    env: Mapping[str, bool] | Iterable[str] | None = None,
    compiled: CompiledRule | None = None,
) -> ProbeResult:
    """Whether `rule` would fire on an answer `text` (text rules) or on a call of `tool` with
    `arguments` (tool rules; `tool` defaults to the rule's own). `env` None: `when` is assumed
    to hold. A disabled rule is probed as if enabled, and the reason says so. `compiled`, from
    `compile_for_probe(rule)`, saves compiling the rule again for each of many samples."""
    if compiled is None:
        loaded = compile_for_probe(rule)
        if isinstance(loaded, str):
            return ProbeResult(False, f"the rule is not loadable: {loaded}", "")
        compiled = loaded
    note = "" if rule.enabled else " (the rule is disabled, so it fires nowhere yet)"
    if rule.scope == "text":
        if text is None:
            return ProbeResult(False, "a text rule needs a sample answer text", "")
        target = text
        if not text.strip():
            return ProbeResult(
                False, "an answer without text is not judged by text rules" + note, target
            )
    else:
        wanted = rule.scope[5:]
        target = canonical_arguments(arguments)
        if tool is not None and tool != wanted:
            return ProbeResult(
                False, f"the rule watches {wanted!r} calls, not {tool!r}" + note, target
            )
    if env is not None:
        flags = env_flags(env)
        missing = [flag for flag in rule.when if flag not in flags]
        if missing:
            return ProbeResult(
                False, f"`when` does not hold: needs {', '.join(missing)}" + note, target
            )
    fires = compiled.matches(target)
    if not rule.condition:
        reason = "an empty condition matches every target"
    elif rule.negate:
        reason = (
            "the condition is not found, and the rule is negated"
            if fires
            else ("the condition is found, and the rule is negated")
        )
    else:
        reason = "the condition is found" if fires else "the condition is not found"
    return ProbeResult(fires, reason + note, target)


def compile_for_probe(rule: Rule) -> CompiledRule | str:
    """The rule compiled as if enabled, or why it cannot be loaded."""
    loaded = RuleSet.compile([dataclasses.replace(rule, enabled=True)], log=_Quiet())
    if not loaded.rules:
        return loaded.skipped[0][1]
    return loaded.rules[0]


class _Quiet:
    """A logger that drops the skip warning: the probe reports it in its result instead."""

    def warning(self, *args: object, **kwargs: object) -> None:
        return None
