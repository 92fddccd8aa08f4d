"""R6.4–R6.8: loading rules, the soft half, the hard half, holding, the ceiling and repeats."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from evacore.rules import SEEDS, RepeatState, Rule, RuleSet, TourRules, interrupt_message
from tests.rules.conftest import RecordingLog, make

TAIL = make("reply_tail", condition=r"↩ #\d+\s*$", negate=True, when=["telegram"])
IMAGE = make("markdown_image", condition=r"!\[[^\]]*\]\([^)]*\)", when=["telegram"])
SHELL = make("local_shell", "tool:shell", when=["client_ops"])
ENV_FILE = make("env_file", "tool:read_file", condition=r'"path":"[^"]*\.env"')


def tour(
    *rules: Rule,
    env: object = ("telegram", "client_ops"),
    state: RepeatState | None = None,
    turn: int = 10,
    log: RecordingLog | None = None,
) -> TourRules:
    return TourRules(RuleSet.compile(rules, log=log), env, state, turn, log=log)  # type: ignore[arg-type]


# --- loading -----------------------------------------------------------------------------------


def test_r6_4_stored_rule_with_invalid_regex_is_skipped_with_a_warning(log: RecordingLog) -> None:
    broken = Rule(name="broken", scope="text", condition="(?<=a)b", text="t")
    ruleset = RuleSet.compile([broken, TAIL], log=log)
    assert ruleset.names == ["reply_tail"]
    assert ruleset.skipped[0][0] == "broken" and "RE2" in ruleset.skipped[0][1]
    assert log.lines == [
        ("warning", "stream rule skipped", {"rule": "broken", "reason": ruleset.skipped[0][1]})
    ]
    assert TourRules(ruleset, {"telegram": True}).check_answer("no tail").action == "discard"


def test_r6_4_other_bad_stored_data_is_skipped_not_raised(log: RecordingLog) -> None:
    bad = [
        Rule(name="s", scope="tool:", text="t"),
        Rule(name="w", scope="text", when=("moon",), text="t"),
        Rule(name="r", scope="text", repeat="sometimes", text="t"),
        Rule(name="Bad Name", scope="text", text="t"),
        Rule(name="reply_tail", scope="text", text="a second row with a taken name"),
    ]
    ruleset = RuleSet.compile([*bad, TAIL], log=log)
    assert ruleset.names == ["reply_tail"] and len(ruleset.skipped) == 5
    assert log.events("warning") == ["stream rule skipped"] * 5


def test_r6_2_disabled_rule_is_not_loaded() -> None:
    off = make("off", condition="x", enabled=False)
    assert RuleSet.compile([off]).names == []
    assert tour(off).check_answer("x").action == "pass"


# --- soft half ---------------------------------------------------------------------------------


def test_r6_5_soft_rule_fires_on_its_tool_with_its_text() -> None:
    rules = tour(SHELL)
    [firing] = rules.check_tool_call("shell", '{"command": "ls"}')
    assert firing.reminder == ("local_shell", "text of local_shell")
    assert (firing.kind, firing.scope, firing.retry, firing.tool, firing.turn) == (
        "tool",
        "tool:shell",
        False,
        "shell",
        10,
    )
    assert rules.check_tool_call("read_file", '{"path": "a"}') == []


def test_r6_5_tool_name_must_match_exactly() -> None:
    rules = tour(SHELL)
    assert (
        rules.check_tool_call("Shell", "{}") == [] and rules.check_tool_call("shell_2", "{}") == []
    )


def test_r6_3_condition_runs_over_compact_arguments() -> None:
    rules = tour(ENV_FILE)
    assert rules.check_tool_call("read_file", '{"path": "notes.md"}') == []
    assert len(rules.check_tool_call("read_file", '{ "path" : "conf/.env" }')) == 1


def test_r6_2_negated_tool_rule_fires_when_the_condition_is_missing() -> None:
    needs_timeout = make("needs_timeout", "tool:shell", condition='"timeout":')
    negated = make("no_timeout", "tool:shell", condition='"timeout":', negate=True)
    assert tour(negated).check_tool_call("shell", '{"command": "ls", "timeout": 5}') == []
    assert len(tour(negated).check_tool_call("shell", '{"command": "ls"}')) == 1
    assert len(tour(needs_timeout).check_tool_call("shell", '{"command": "ls", "timeout": 5}')) == 1


def test_r6_2_when_must_hold_entirely() -> None:
    both = make("both", "tool:shell", when=["client_ops", "master"])
    assert (
        tour(both, env={"client_ops": True, "master": False}).check_tool_call("shell", "{}") == []
    )
    assert (
        len(tour(both, env={"client_ops": True, "master": True}).check_tool_call("shell", "{}"))
        == 1
    )
    assert tour(SHELL, env=()).check_tool_call("shell", "{}") == []


def test_r6_2_master_counts_as_trusted() -> None:
    trusted_only = make("t", "tool:shell", when=["trusted"])
    assert len(tour(trusted_only, env={"master": True}).check_tool_call("shell", "{}")) == 1
    assert tour(trusted_only, env={"master": False}).check_tool_call("shell", "{}") == []


def test_r6_8_soft_rule_fires_once_per_tour() -> None:
    rules = tour(SHELL)
    assert len(rules.check_tool_call("shell", '{"command": "a"}')) == 1
    assert rules.check_tool_call("shell", '{"command": "b"}') == []
    assert len(rules.firings) == 1


def test_r6_5_two_soft_rules_on_one_call_both_ride() -> None:
    other = make("also_shell", "tool:shell", condition="rm ")
    rules = tour(SHELL, other)
    assert [f.rule for f in rules.check_tool_call("shell", '{"command": "rm -rf x"}')] == [
        "also_shell",
        "local_shell",
    ]


# --- repeats over chat turns ------------------------------------------------------------------


def test_r6_8_repeat_once_never_fires_again_in_the_chat() -> None:
    once = make("once", "tool:shell", repeat="once")
    assert (
        tour(once, state=RepeatState.from_records([("once", 3)]), turn=50).check_tool_call(
            "shell", "{}"
        )
        == []
    )
    assert len(tour(once, state=RepeatState(), turn=50).check_tool_call("shell", "{}")) == 1


def test_r6_8_repeat_after_n_counts_chat_turns() -> None:
    every3 = make("every3", "tool:shell", repeat="after:3")
    records: list[tuple[str, int]] = []
    fired_turns = []
    for turn in range(1, 11):
        rules = tour(every3, state=RepeatState.from_records(records), turn=turn)
        for _ in range(2):  # two calls per tour: the second never fires again
            for firing in rules.check_tool_call("shell", "{}"):
                records.append((firing.rule, firing.turn))
                fired_turns.append(turn)
    assert fired_turns == [1, 4, 7, 10]


def test_r6_8_repeat_state_takes_the_latest_turn_of_each_rule() -> None:
    state = RepeatState.from_records([("a", 7), ("a", 2), ("b", 1)])
    assert state.last_fired_turn == {"a": 7, "b": 1}


def test_r6_8_no_repeat_policy_fires_in_every_tour() -> None:
    records = [("local_shell", t) for t in range(1, 10)]
    assert (
        len(
            tour(SHELL, state=RepeatState.from_records(records), turn=10).check_tool_call(
                "shell", "{}"
            )
        )
        == 1
    )


# --- hard half ---------------------------------------------------------------------------------


def test_r6_6_miss_discards_with_the_exact_interrupt() -> None:
    rules = tour(TAIL)
    verdict = rules.check_answer("Hello there")
    assert verdict.action == "discard" and verdict.rule == TAIL
    assert verdict.interrupt == (
        '<system-interrupt reason="rule_violation" rule="reply_tail">text of reply_tail\n'
        "That reply was discarded and NOBODY saw it. Write the reply again, following the rule."
        "</system-interrupt>"
    )
    assert verdict.interrupt == interrupt_message(TAIL)
    assert [(f.kind, f.retry) for f in verdict.firings] == [("answer", True)]


def test_r6_6_passing_answer_passes() -> None:
    assert tour(TAIL, IMAGE).check_answer("Hello ↩ #12").action == "pass"


def test_r13_answer_without_text_is_not_judged() -> None:
    rules = tour(TAIL)
    assert rules.check_answer("").action == "pass"
    assert rules.check_answer(" \n ").action == "pass"
    assert rules.firings == [] and rules.any_text_rule_armed()


def test_r6_8_one_retry_per_tour_then_misses_keep_and_remind_later() -> None:
    rules = tour(TAIL, IMAGE)
    assert rules.check_answer("![x](y) ↩ #1").action == "discard"  # markdown_image
    assert not rules.any_text_rule_armed()  # the retry is used: speech flows again
    verdict = rules.check_answer("no tail here")  # reply_tail misses after the retry
    assert verdict.action == "keep" and verdict.interrupt is None
    assert verdict.late_reminders == (("reply_tail", "text of reply_tail"),)
    assert [(f.rule, f.retry) for f in rules.firings] == [
        ("markdown_image", True),
        ("reply_tail", False),
    ]
    assert rules.take_pending_reminders() == [("reply_tail", "text of reply_tail")]
    assert rules.take_pending_reminders() == []


def test_r6_8_two_misses_in_one_answer_only_the_first_discards() -> None:
    rules = tour(TAIL, IMAGE)
    first = rules.check_answer("![x](y)")  # misses both; name order: markdown_image first
    assert first.action == "discard" and first.rule == IMAGE and len(first.firings) == 1
    second = rules.check_answer("![x](y) still no tail")
    assert second.action == "keep" and [f.rule for f in second.firings] == ["reply_tail"]


def test_r6_8_rule_that_fired_does_not_fire_again_in_the_tour() -> None:
    rules = tour(TAIL)
    assert rules.check_answer("no tail").action == "discard"
    assert rules.check_answer("still no tail").action == "pass"
    assert len(rules.firings) == 1


def test_r6_8_every_different_miss_after_the_retry_gets_its_reminder() -> None:
    shout = make("shout", condition="[A-Z]{5,}")
    rules = tour(TAIL, IMAGE, shout)
    assert rules.check_answer("HELLO ↩ #1").action == "discard"
    verdict = rules.check_answer("![x](y)")
    assert [name for name, _ in verdict.late_reminders] == ["markdown_image", "reply_tail"]


def test_r6_8_text_rule_repeat_policy_applies() -> None:
    once = make("tail_once", condition=r"#\d+$", negate=True, repeat="once")
    assert (
        tour(once, state=RepeatState({"tail_once": 1}), turn=2).check_answer("x").action == "pass"
    )


def test_r6_2_text_rule_when_must_hold() -> None:
    assert tour(TAIL, env={"telegram": False}).check_answer("no tail").action == "pass"


# --- holding speech --------------------------------------------------------------------------


def test_r6_7_armed_only_while_a_text_rule_can_discard() -> None:
    assert tour(TAIL).any_text_rule_armed()
    assert tour(TAIL).armed_text_rules() == [TAIL]
    assert not tour(SHELL, ENV_FILE).any_text_rule_armed()  # soft rules never hold speech
    assert not tour(TAIL, env={"telegram": False}).any_text_rule_armed()
    assert not tour(
        make("o", condition="x", repeat="once"), state=RepeatState({"o": 1})
    ).any_text_rule_armed()
    assert not tour().any_text_rule_armed()


def test_r6_7_armed_set_shrinks_as_rules_fire() -> None:
    rules = tour(TAIL, IMAGE)
    assert {r.name for r in rules.armed_text_rules()} == {"reply_tail", "markdown_image"}
    rules.check_answer("fine ↩ #3")
    assert {r.name for r in rules.armed_text_rules()} == {"reply_tail", "markdown_image"}
    rules.check_answer("no tail")
    assert rules.armed_text_rules() == []  # the retry is spent


# --- reminders riding on tool results -----------------------------------------------------------


def test_r13_pending_reminder_rides_before_soft_reminders_of_the_next_call() -> None:
    rules = tour(TAIL, IMAGE, SHELL)
    rules.check_answer("![a](b) ↩ #1")
    rules.check_answer("no tail, and a shell call")  # kept; its own calls come next
    assert rules.reminders_for_call("shell", '{"command": "ls"}') == [
        ("reply_tail", "text of reply_tail"),
        ("local_shell", "text of local_shell"),
    ]
    assert rules.reminders_for_call("shell", '{"command": "ls"}') == []


# --- telemetry ---------------------------------------------------------------------------------


def test_r6_11_firings_are_logged_with_retry(log: RecordingLog) -> None:
    rules = TourRules(
        RuleSet.compile([TAIL, IMAGE, SHELL], log=log),
        {"telegram": True, "client_ops": True},
        RepeatState(),
        4,
        log=log,
        log_fields={"chat_id": "c1", "tour_id": "t1"},
    )
    rules.check_tool_call("shell", "{}")
    rules.check_answer("![a](b)")
    rules.check_answer("![a](b) no tail")
    assert log.lines == [
        (
            "info",
            "stream rule fired",
            {
                "rule": "local_shell",
                "scope": "tool:shell",
                "turn": 4,
                "tool": "shell",
                "chat_id": "c1",
                "tour_id": "t1",
            },
        ),
        (
            "info",
            "stream rule fired on the answer",
            {
                "rule": "markdown_image",
                "scope": "text",
                "turn": 4,
                "retry": True,
                "chat_id": "c1",
                "tour_id": "t1",
            },
        ),
        (
            "info",
            "stream rule fired on the answer",
            {
                "rule": "reply_tail",
                "scope": "text",
                "turn": 4,
                "retry": False,
                "chat_id": "c1",
                "tour_id": "t1",
            },
        ),
    ]


def test_r6_11_firings_count_in_prometheus() -> None:
    labels = {"rule": "counted_rule", "scope": "text", "retry": "true"}
    before = REGISTRY.get_sample_value("evacore_stream_rule_fired_total", labels) or 0.0
    tour(make("counted_rule", condition="x")).check_answer("x")
    assert REGISTRY.get_sample_value("evacore_stream_rule_fired_total", labels) == before + 1


def test_r6_4_text_with_a_lone_surrogate_does_not_crash_matching() -> None:
    rules = tour(make("bad_char", condition="x"))
    assert rules.check_answer("x \ud800").action == "discard"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.text(max_size=200))
def test_r6_4_no_answer_or_arguments_can_make_the_seeded_rules_raise(
    text: str, arguments: str
) -> None:
    everything = {"telegram": True, "client_ops": True, "master": True, "picture": True}
    rules = TourRules(RuleSet.compile(SEEDS), everything, RepeatState(), 1, log=RecordingLog())
    rules.check_answer(text)
    rules.check_answer(text + " ↩ #1")
    rules.reminders_for_call("shell", arguments)
    rules.reminders_for_call("write_file", arguments)
