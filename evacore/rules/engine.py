"""The stream-rules engine for one tour (R6.5–R6.8): which rules are armed, which fire on a
tool call or an answer, and the exact texts put into the prompt copy.

Must not: do I/O beyond log lines and metric counters — the agent loop loads rules and repeat
state, persists firings and edits the prompt copy; this module only decides and formats.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

from evacore.render.tool_results import DEFAULT_MAX_CHARS, EMPTY_MARKER, cut_output
from evacore.rules import _checks
from evacore.rules.model import Rule
from evacore.rules.target import canonical_arguments
from evacore.rules.telemetry import note_firing

_log = structlog.get_logger("evacore.rules")

INTERRUPT_TAIL = (
    "That reply was discarded and NOBODY saw it. Write the reply again, following the rule."
)
"""The fixed second line of every `<system-interrupt>` (R6.6)."""

Reminder = tuple[str, str]
"""(rule name, rule text) of a `<system-reminder>` waiting to ride on a tool result."""


def interrupt_message(rule: Rule) -> str:
    """The user-role message appended to the prompt copy after a discarded answer (R6.6)."""
    return (
        f'<system-interrupt reason="rule_violation" rule="{rule.name}">'
        f"{rule.text}\n{INTERRUPT_TAIL}</system-interrupt>"
    )


def reminder_block(name: str, text: str) -> str:
    """One `<system-reminder>` block (R6.5), without the newline that follows it."""
    return f'<system-reminder rule="{name}">{text}</system-reminder>'


def insert_reminders(
    output: str, reminders: Iterable[Reminder] = (), *, max_chars: int | None = DEFAULT_MAX_CHARS
) -> str:
    """A tool result's text in the prompt copy (R5.3, R6.5, §13). In order: the `(empty)`
    marker only if no reminder rides on the result; the cap on the tool's own output (with
    its note); then each reminder on top, followed by a newline. None = no cap."""
    blocks = [reminder_block(name, text) for name, text in reminders]
    body = output if max_chars is None else cut_output(output, max_chars)
    if not blocks:
        return EMPTY_MARKER if output == "" else body
    return "".join(block + "\n" for block in blocks) + body


@dataclass(frozen=True)
class CompiledRule:
    """A loaded rule with its RE2 program (None for an empty condition)."""

    rule: Rule
    program: Any | None
    repeat: tuple[str, int]
    when: frozenset[str]

    def matches(self, target: str) -> bool:
        """Whether the rule fires on this target: the condition found (or, negated, missing).
        A matching error never fires the rule (it is logged)."""
        if self.program is None:
            return not self.rule.negate
        try:
            found = _search(self.program, target)
        except Exception as exc:  # noqa: BLE001 - a rule must never cost a tour
            _log.warning("stream rule match failed", rule=self.rule.name, error=str(exc))
            return False
        return found != self.rule.negate


def _search(program: Any, target: str) -> bool:
    try:
        return program.search(target) is not None
    except UnicodeEncodeError:  # a lone surrogate cannot go to RE2 as UTF-8
        return program.search(target.encode("utf-8", "replace").decode("utf-8")) is not None


class RuleSet:
    """The enabled, loadable rules, by half. Build once per rule change and share across tours."""

    def __init__(
        self, rules: Iterable[CompiledRule], skipped: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.rules: tuple[CompiledRule, ...] = tuple(rules)
        self.skipped: tuple[tuple[str, str], ...] = tuple(skipped)
        """(name, reason) of each stored rule that was not loaded because its data is bad."""
        self.text_rules: tuple[CompiledRule, ...] = tuple(
            c for c in self.rules if c.rule.scope == "text"
        )
        self._by_tool: dict[str, tuple[CompiledRule, ...]] = {}
        for compiled in self.rules:
            if compiled.rule.scope.startswith("tool:"):
                tool = compiled.rule.scope[5:]
                self._by_tool[tool] = (*self._by_tool.get(tool, ()), compiled)

    @classmethod
    def compile(cls, rules: Iterable[Rule], *, log: Any = None) -> RuleSet:
        """Load the enabled rules, in name order. A rule with bad data (a regex RE2 refuses, a
        malformed scope, `when` or `repeat`, a duplicate name) is skipped with a warning."""
        log = log or _log
        loaded: list[CompiledRule] = []
        skipped: list[tuple[str, str]] = []
        seen: set[str] = set()
        for rule in sorted(rules, key=lambda r: str(r.name)):
            if not rule.enabled:
                continue
            reason = _load_problem(rule, seen)
            program = None
            if reason is None and rule.condition:
                try:
                    program = _checks.compile_condition(rule.condition)
                except Exception as exc:  # noqa: BLE001 - re2.error, or undecodable data
                    reason = f"the regex does not compile under RE2: {_checks._re2_reason(exc)}"
            if reason is not None:
                log.warning("stream rule skipped", rule=rule.name, reason=reason)
                skipped.append((str(rule.name), reason))
                continue
            seen.add(rule.name)
            repeat = _checks.parse_repeat(rule.repeat)
            assert repeat is not None  # checked by _load_problem
            loaded.append(CompiledRule(rule, program, repeat, frozenset(rule.when)))
        return cls(loaded, skipped)

    def tool_rules(self, tool: str) -> tuple[CompiledRule, ...]:
        return self._by_tool.get(tool, ())

    @property
    def names(self) -> list[str]:
        return [c.rule.name for c in self.rules]


def _load_problem(rule: Rule, seen: set[str]) -> str | None:
    if not isinstance(rule.name, str) or _checks.name_problem(rule.name):
        return f"bad name {rule.name!r}"
    if rule.name in seen:
        return "a second rule with this name"
    if not isinstance(rule.scope, str) or not isinstance(rule.condition, str):
        return "scope and condition must be strings"
    if not isinstance(rule.text, str):
        return "text must be a string"
    for problem in (
        _checks.scope_problem(rule.scope),
        _checks.when_problem(list(rule.when)),
        _checks.repeat_problem(rule.repeat),
    ):
        if problem:
            return problem
    return None


@dataclass
class RepeatState:
    """Per rule name, the last chat turn it fired in this chat (from `stream_rule_stat`);
    a name present means the rule has fired in this chat at least once."""

    last_fired_turn: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, int]]) -> RepeatState:
        """From (rule, turn) pairs of this chat's `stream_rule_stat` rows."""
        last: dict[str, int] = {}
        for rule, turn in records:
            last[rule] = max(turn, last.get(rule, turn))
        return cls(last)

    def allows(self, name: str, repeat: tuple[str, int], turn: int) -> bool:
        policy, every = repeat
        last = self.last_fired_turn.get(name)
        if policy == "every" or last is None:
            return True
        if policy == "once":
            return False
        return turn - last >= every or turn < last  # turn < last: the count went back; stale


@dataclass(frozen=True)
class Firing:
    """One rule firing, for the log, `stream_rule_stat` and counters (R6.11)."""

    rule: str
    scope: str
    kind: Literal["tool", "answer"]
    retry: bool
    """For answer firings: whether the answer was discarded and the step played again."""
    turn: int
    text: str
    """The rule's text at firing time."""
    at: datetime
    tool: str | None = None
    """For tool firings: the tool the call named."""

    @property
    def reminder(self) -> Reminder:
        return (self.rule, self.text)


@dataclass(frozen=True)
class AnswerVerdict:
    """What to do with a finished answer (R6.6, R6.8)."""

    action: Literal["pass", "discard", "keep"]
    rule: Rule | None = None
    """The rule that discarded the answer."""
    interrupt: str | None = None
    """For `discard`: the user-role message to append to the prompt copy before the retry."""
    late_reminders: tuple[Reminder, ...] = ()
    """For `keep`: reminders now waiting for the next tool result (see take_pending_reminders)."""
    firings: tuple[Firing, ...] = ()


_PASS = AnswerVerdict("pass")


class TourRules:
    """The rules' state in one tour: env and turn fixed at start, dedup, the one retry."""

    def __init__(
        self,
        ruleset: RuleSet,
        env: Mapping[str, bool] | Iterable[str],
        repeat_state: RepeatState | None = None,
        turn: int = 0,
        *,
        log: Any = None,
        log_fields: Mapping[str, Any] | None = None,
    ) -> None:
        self.ruleset = ruleset
        self.env = env_flags(env)
        self.repeat_state = repeat_state or RepeatState()
        self.turn = turn
        self.retry_used = False
        self.firings: list[Firing] = []
        self._fired: set[str] = set()
        self._pending: list[Reminder] = []
        self._log = log or _log
        self._log_fields = dict(log_fields or {})

    def _eligible(self, compiled: CompiledRule) -> bool:
        """Enabled (loaded), `when` holds, repeat allows it, not fired in this tour."""
        return (
            compiled.rule.name not in self._fired
            and compiled.when <= self.env
            and self.repeat_state.allows(compiled.rule.name, compiled.repeat, self.turn)
        )

    def armed_text_rules(self) -> list[Rule]:
        """Text rules that could discard the next answer (R6.7); empty once the retry is used."""
        if self.retry_used:
            return []
        return [c.rule for c in self.ruleset.text_rules if self._eligible(c)]

    def any_text_rule_armed(self) -> bool:
        """True: hold the next step's deltas and tool calls until check_answer passes them."""
        return bool(self.armed_text_rules())

    def check_tool_call(self, name: str, arguments: str) -> list[Firing]:
        """Soft rules firing on this call (R6.5), each at most once per tour."""
        candidates = [c for c in self.ruleset.tool_rules(name) if self._eligible(c)]
        if not candidates:
            return []
        target = canonical_arguments(arguments)
        fired = []
        for compiled in candidates:
            if compiled.matches(target):
                fired.append(self._fire(compiled, "tool", retry=False, tool=name))
        return fired

    def check_answer(self, text: str) -> AnswerVerdict:
        """Judge a finished answer's text (R6.6, R6.8, §13). Text that is empty or only
        whitespace is not judged. The first miss while the retry is unused discards the answer;
        after that, every miss keeps the answer and queues the rule's text as a reminder."""
        if not text.strip():
            return _PASS
        hits = [c for c in self.ruleset.text_rules if self._eligible(c) and c.matches(text)]
        if not hits:
            return _PASS
        if not self.retry_used:
            self.retry_used = True
            firing = self._fire(hits[0], "answer", retry=True)
            rule = hits[0].rule
            return AnswerVerdict("discard", rule, interrupt_message(rule), (), (firing,))
        firings = tuple(self._fire(c, "answer", retry=False) for c in hits)
        late = tuple(f.reminder for f in firings)
        self._pending.extend(late)
        return AnswerVerdict("keep", None, None, late, firings)

    def take_pending_reminders(self) -> list[Reminder]:
        """Second-miss reminders waiting for the next tool result; taking them clears them."""
        pending, self._pending = self._pending, []
        return pending

    def reminders_for_call(self, name: str, arguments: str) -> list[Reminder]:
        """Everything that rides on this call's result: pending second-miss reminders first,
        then the soft rules firing on the call. Call once per tool result, in declared order."""
        return self.take_pending_reminders() + [
            f.reminder for f in self.check_tool_call(name, arguments)
        ]

    def _fire(
        self,
        compiled: CompiledRule,
        kind: Literal["tool", "answer"],
        *,
        retry: bool,
        tool: str | None = None,
    ) -> Firing:
        rule = compiled.rule
        self._fired.add(rule.name)
        firing = Firing(
            rule=rule.name,
            scope=rule.scope,
            kind=kind,
            retry=retry,
            turn=self.turn,
            text=rule.text,
            at=datetime.now(UTC),
            tool=tool,
        )
        self.firings.append(firing)
        note_firing(firing, log=self._log, fields=self._log_fields)
        return firing


def env_flags(env: Mapping[str, bool] | Iterable[str]) -> frozenset[str]:
    """The flags that hold: a mapping's true keys, or the given names; master implies trusted."""
    flags = {flag for flag, on in env.items() if on} if isinstance(env, Mapping) else set(env)
    if "master" in flags:
        flags.add("trusted")  # the master is also trusted (SPEC §1)
    return frozenset(flags)
