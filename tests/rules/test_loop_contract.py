"""R6.5–R6.8 end to end through a minimal agent loop that uses the engine as the integrator
must: what is stored, streamed, executed and put into the prompt copy."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from evacore.rules import RepeatState, RuleSet, TourRules, insert_reminders
from tests.rules.conftest import make

TAIL = make("reply_tail", condition=r"↩ #\d+$", negate=True, when=["telegram"])
SHELL = make("local_shell", "tool:shell", when=["client_ops"])


@dataclass
class Answer:
    text: str
    calls: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Outcome:
    prompt: list[dict[str, str]] = field(default_factory=list)
    streamed: list[str] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)
    stored_results: list[str] = field(default_factory=list)
    held: list[bool] = field(default_factory=list)


def run_tour(rules: TourRules, script: list[Answer], outputs: dict[str, str]) -> Outcome:
    out = Outcome(prompt=[{"role": "user", "content": "hi"}])
    answers = iter(script)
    for answer in answers:
        out.held.append(rules.any_text_rule_armed())  # before the step: hold deltas or not
        verdict = rules.check_answer(answer.text)
        if verdict.action == "discard":
            out.prompt.append({"role": "user", "content": verdict.interrupt or ""})
            continue  # the same step is played again; nothing was streamed or executed
        out.streamed.append(answer.text)
        out.prompt.append({"role": "assistant", "content": answer.text})
        if not answer.calls:
            break
        for name, arguments in answer.calls:
            output = outputs[name]
            out.executed.append(name)
            out.stored_results.append(output)  # stored and streamed: the clean output
            reminders = rules.reminders_for_call(name, arguments)
            out.prompt.append(
                {"role": "tool", "content": insert_reminders(output, reminders, max_chars=100)}
            )
    return out


def new_tour(*rules: object, env: tuple[str, ...] = ("telegram", "client_ops")) -> TourRules:
    return TourRules(RuleSet.compile(rules), env, RepeatState(), 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("with_call", [False, True])
@pytest.mark.parametrize("kind", ["none", "soft", "hard", "both"])
def test_r6_5_r6_6_matrix(kind: str, with_call: bool) -> None:
    rules = {"none": (), "soft": (SHELL,), "hard": (TAIL,), "both": (TAIL, SHELL)}[kind]
    calls = [("shell", '{"command": "ls"}')] if with_call else []
    script = [Answer("done", calls), Answer("done ↩ #5", calls), Answer("final ↩ #5")]
    out = run_tour(new_tour(*rules), script, {"shell": ""})
    hard = kind in ("hard", "both")
    assert out.held[0] is hard
    assert out.streamed[0] == ("done ↩ #5" if hard else "done")  # the miss is never streamed
    assert "done" not in [p["content"] for p in out.prompt if p["role"] == "assistant"] or not hard
    interrupts = [p for p in out.prompt if p["content"].startswith("<system-interrupt")]
    assert len(interrupts) == (1 if hard else 0)
    runs = (1 if hard else 2) if with_call else 0  # a discarded answer's calls never run
    assert out.executed == ["shell"] * runs
    assert out.stored_results == [""] * runs  # the clean output, never a reminder
    tool_prompts = [p["content"] for p in out.prompt if p["role"] == "tool"]
    soft = kind in ("soft", "both")
    reminded = '<system-reminder rule="local_shell">text of local_shell</system-reminder>\n'
    expected = [reminded if soft and i == 0 else "(empty)" for i in range(runs)]  # once per tour
    assert tool_prompts == expected


def test_r6_8_second_miss_reminder_rides_on_the_kept_answers_own_call() -> None:
    shout = make("shout", condition="[A-Z]{4,}")
    rules = new_tour(TAIL, shout)
    script = [
        Answer("LOUD ↩ #1"),  # shout: discarded
        Answer("quiet, no tail", [("read_file", '{"path": "a"}')]),  # reply_tail: kept
        Answer("ok ↩ #1"),
    ]
    out = run_tour(rules, script, {"read_file": "contents"})
    assert out.streamed == ["quiet, no tail", "ok ↩ #1"]
    assert out.held == [True, False, False]
    assert out.prompt[-2]["content"] == (
        '<system-reminder rule="reply_tail">text of reply_tail</system-reminder>\ncontents'
    )
    assert out.stored_results == ["contents"]


def test_r6_8_second_miss_in_the_last_answer_leaves_only_a_trace() -> None:
    shout = make("shout", condition="[A-Z]{4,}")
    rules = new_tour(TAIL, shout)
    out = run_tour(rules, [Answer("LOUD ↩ #1"), Answer("no tail")], {})
    assert out.streamed == ["no tail"]
    assert not any("system-reminder" in p["content"] for p in out.prompt)
    assert [(f.rule, f.retry) for f in rules.firings] == [("shout", True), ("reply_tail", False)]
    assert rules.take_pending_reminders() == [
        ("reply_tail", "text of reply_tail")
    ]  # unseen; telemetry has it
