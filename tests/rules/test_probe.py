"""R6.9, R10, R11: "would it fire" for one rule and a sample, as the CLI and the editor ask."""

from __future__ import annotations

from evacore.rules import Rule, probe_rule
from tests.rules.conftest import make

TAIL = make("reply_tail", condition=r"↩ #\d+$", negate=True, when=["telegram"])


def test_r6_9_probe_text_rule() -> None:
    assert probe_rule(TAIL, text="hello").fires
    assert "negated" in probe_rule(TAIL, text="hello").reason
    assert not probe_rule(TAIL, text="hello ↩ #4").fires


def test_r6_9_probe_checks_when_only_if_env_is_given() -> None:
    assert probe_rule(TAIL, text="hello", env={"telegram": True}).fires
    result = probe_rule(TAIL, text="hello", env=[])
    assert not result.fires and "telegram" in result.reason


def test_r6_9_probe_tool_rule_shows_the_compact_target() -> None:
    rule = make("env_file", "tool:read_file", condition=r'"path":"[^"]*\.env"')
    result = probe_rule(rule, arguments='{"path": "x/.env"}')
    assert result.fires and result.target == '{"path":"x/.env"}'
    assert not probe_rule(rule, tool="write_file", arguments='{"path": "x/.env"}').fires


def test_r6_9_probe_reports_a_bad_stored_regex_and_a_disabled_rule() -> None:
    broken = Rule(name="b", scope="text", condition="(?=x)", text="t")
    assert "not loadable" in probe_rule(broken, text="x").reason
    off = make("off", condition="x", enabled=False)
    result = probe_rule(off, text="x")
    assert result.fires and "disabled" in result.reason
