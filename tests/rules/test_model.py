"""R6.2, R6.4, R12.5: rule validation on create and edit, and the public JSON shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from evacore.errors import Conflict, RuleInvalid
from evacore.rules import Rule, apply_patch, content_hash, rule_to_json, validate_rule

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _text_rule(**extra: object) -> dict[str, object]:
    return {"name": "no_markdown", "scope": "text", "text": "Plain text only.", **extra}


def test_r6_2_text_rule_mode_is_derived_as_interrupt() -> None:
    rule = validate_rule(_text_rule(), now=T0)
    assert rule.mode == "interrupt"
    assert rule.created_at == rule.updated_at == T0
    assert (rule.condition, rule.negate, rule.when, rule.repeat, rule.enabled) == (
        "",
        False,
        (),
        None,
        True,
    )


def test_r6_2_tool_rule_mode_is_derived_as_remind() -> None:
    rule = validate_rule({"name": "x", "scope": "tool:shell", "text": "careful"})
    assert rule.mode == "remind"


def test_r6_4_mode_given_that_fits_is_accepted() -> None:
    assert validate_rule(_text_rule(mode="interrupt")).mode == "interrupt"
    assert (
        validate_rule({"name": "a", "scope": "tool:x", "text": "t", "mode": "remind"}).mode
        == "remind"
    )


BAD_INPUTS = [
    # (changes to a valid text rule, words the message must contain)
    ({"condition": "(?=x)"}, ["condition", "RE2", "negate"]),
    ({"condition": "(?<!a)b"}, ["condition", "lookaround"]),
    ({"condition": r"(a)\1"}, ["condition", "backreference"]),
    ({"condition": "(abc"}, ["condition", "does not compile"]),
    ({"condition": "[z-a]"}, ["condition", "does not compile"]),
    ({"condition": r"foo\Z"}, ["condition", r"\z"]),
    ({"condition": "a" * 4001}, ["condition", "4000"]),
    ({"text": ""}, ["text", "empty"]),
    ({"text": "   \n"}, ["text", "empty"]),
    ({"text": "x" * 401}, ["text", "401", "400"]),
    ({"text": "a\x00b"}, ["text", "NUL"]),
    ({"scope": "tool:"}, ["scope"]),
    ({"scope": "tools:shell"}, ["scope"]),
    ({"scope": "TEXT"}, ["scope"]),
    ({"scope": "tool:read file"}, ["scope"]),
    ({"scope": "tool:a:b"}, ["scope"]),
    ({"scope": "answer"}, ["scope"]),
    ({"scope": ""}, ["scope"]),
    ({"mode": "remind"}, ["mode", "text", "leave mode out"]),
    ({"scope": "tool:shell", "mode": "interrupt"}, ["mode", "cannot be taken back"]),
    ({"mode": "shout"}, ["mode", "shout"]),
    ({"when": ["telegram", "weekend"]}, ["when", "weekend", "client_ops"]),
    ({"when": "telegram"}, ["when", "list"]),
    ({"when": [1]}, ["when.0", "string"]),
    ({"repeat": "twice"}, ["repeat", "after:N"]),
    ({"repeat": "after:"}, ["repeat"]),
    ({"repeat": "after:0"}, ["repeat"]),
    ({"repeat": "after:-2"}, ["repeat"]),
    ({"repeat": "after:x"}, ["repeat"]),
    ({"repeat": "after:01"}, ["repeat"]),
    ({"repeat": "ONCE"}, ["repeat"]),
    ({"repeat": "after:99999999"}, ["repeat"]),
    ({"repeat": 3}, ["repeat", "string"]),
    ({"name": "Bad"}, ["name", "a-z"]),
    ({"name": "a-b"}, ["name"]),
    ({"name": "a b"}, ["name"]),
    ({"name": "правило"}, ["name"]),
    ({"name": ""}, ["name", "empty"]),
    ({"name": "n" * 65}, ["name", "64"]),
    ({"name": 5}, ["name", "string"]),
    ({"priority": 1}, ["unknown field", "priority"]),
    ({"negate": "yes"}, ["negate", "true or false"]),
    ({"negate": 1}, ["negate", "true or false"]),
    ({"enabled": "false"}, ["enabled", "true or false"]),
    ({"text": 5}, ["text", "string"]),
    ({"condition": None}, ["condition", "string"]),
    ({"negate": True}, ["negate", "never fires"]),
]


@pytest.mark.parametrize(("change", "words"), BAD_INPUTS, ids=[repr(c) for c, _ in BAD_INPUTS])
def test_r6_4_bad_input_is_rejected_with_a_clear_message(change: dict, words: list[str]) -> None:
    with pytest.raises(RuleInvalid) as caught:
        validate_rule(_text_rule(**change), existing_names=set())
    error = caught.value
    assert error.status == 422 and error.code == "rule_invalid"
    for word in words:
        assert word in error.message, (word, error.message)
    json.dumps(error.to_dict())  # the HTTP layer can render it as is


@pytest.mark.parametrize("missing", ["name", "scope", "text"])
def test_r6_4_required_fields_are_named_when_missing(missing: str) -> None:
    data = _text_rule()
    del data[missing]
    with pytest.raises(RuleInvalid, match=f"{missing}: required"):
        validate_rule(data)


@pytest.mark.parametrize("data", [[1, 2], "rule", None, 5])
def test_r6_4_input_that_is_not_an_object_is_rejected(data: object) -> None:
    with pytest.raises(RuleInvalid, match="JSON object"):
        validate_rule(data)


def test_r6_4_every_problem_is_reported_at_once() -> None:
    with pytest.raises(RuleInvalid) as caught:
        validate_rule({"name": "Bad", "scope": "text", "text": "", "repeat": "often"})
    assert {"name", "text", "repeat"} <= {p.split(":")[0] for p in caught.value.details["problems"]}


def test_r6_4_duplicate_name_is_a_conflict() -> None:
    with pytest.raises(Conflict) as caught:
        validate_rule(_text_rule(), existing_names={"no_markdown"})
    assert caught.value.status == 409 and "no_markdown" in caught.value.message


def test_r6_4_invalid_and_duplicate_reports_the_invalid_input_first() -> None:
    with pytest.raises(RuleInvalid):
        validate_rule(_text_rule(text=""), existing_names={"no_markdown"})


def test_r6_4_text_limit_counts_characters_not_bytes() -> None:
    assert len(validate_rule(_text_rule(text="ж" * 400)).text) == 400


def test_r6_4_when_is_deduplicated_in_canonical_order() -> None:
    rule = validate_rule(_text_rule(when=["picture", "telegram", "picture"]))
    assert rule.when == ("telegram", "picture")


@pytest.mark.parametrize(
    ("given", "stored"), [("", None), (None, None), ("once", "once"), ("after:3", "after:3")]
)
def test_r6_2_repeat_forms(given: object, stored: object) -> None:
    assert validate_rule(_text_rule(repeat=given)).repeat == stored


def test_r6_4_read_only_fields_sent_back_are_ignored() -> None:
    sent = rule_to_json(validate_rule(_text_rule(), now=T0))
    sent.update(seed_hash="f" * 64, seeded=True, created_at="1999-01-01T00:00:00")
    rule = validate_rule(sent, now=T0 + timedelta(days=1))
    assert not rule.seeded and rule.created_at == T0 + timedelta(days=1)


def test_r6_4_condition_error_does_not_print_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuleInvalid):
        validate_rule(_text_rule(condition="(?=a)"))
    assert "re2" not in capfd.readouterr().err.lower()


# --- edits -----------------------------------------------------------------------------------


def _stored() -> Rule:
    return validate_rule(_text_rule(condition="!\\[", when=["telegram"], repeat="once"), now=T0)


def test_r6_4_patch_changes_given_fields_and_bumps_updated_at() -> None:
    later = T0 + timedelta(hours=1)
    patched = apply_patch(_stored(), {"text": "No images.", "repeat": None}, now=later)
    assert (patched.text, patched.repeat, patched.condition, patched.when) == (
        "No images.",
        None,
        "!\\[",
        ("telegram",),
    )
    assert patched.created_at == T0 and patched.updated_at == later


def test_r6_4_patch_that_changes_nothing_keeps_updated_at() -> None:
    rule = _stored()
    assert (
        apply_patch(rule, {"enabled": True, "text": rule.text}, now=T0 + timedelta(days=1)) is rule
    )


def test_r6_4_patch_scope_change_rederives_mode() -> None:
    patched = apply_patch(_stored(), {"scope": "tool:write_file", "condition": ""})
    assert patched.mode == "remind"


def test_r6_4_patch_mode_must_fit_the_resulting_scope() -> None:
    with pytest.raises(RuleInvalid, match="mode"):
        apply_patch(_stored(), {"mode": "remind"})
    with pytest.raises(RuleInvalid, match="mode"):
        apply_patch(_stored(), {"scope": "tool:shell", "mode": "interrupt"})


@pytest.mark.parametrize(
    ("patch", "word"),
    [
        ({"condition": "(?!x)"}, "condition"),
        ({"text": None}, "text: must not be null"),
        ({"text": "y" * 401}, "text"),
        ({"name": "other"}, "renamed"),
        ({"when": ["moon"]}, "when"),
        ({"colour": "red"}, "unknown field"),
        ({"enabled": "no"}, "enabled"),
        ({"negate": True, "condition": ""}, "never fires"),
    ],
)
def test_r6_4_bad_patch_is_rejected_and_changes_nothing(patch: dict, word: str) -> None:
    rule = _stored()
    before = rule_to_json(rule)
    with pytest.raises(RuleInvalid, match=word):
        apply_patch(rule, patch)
    assert rule_to_json(rule) == before


def test_r6_4_patch_keeps_seed_fields() -> None:
    seeded = Rule(
        name="s",
        scope="text",
        text="t",
        seed_version=1,
        seed_hash="a" * 64,
        created_at=T0,
        updated_at=T0,
    )
    patched = apply_patch(seeded, {"text": "u"})
    assert patched.seed_hash == "a" * 64 and patched.seed_version == 1


def test_r6_4_patch_can_fix_a_bad_stored_regex() -> None:
    broken = Rule(name="b", scope="text", condition="(?=x)", text="t")
    assert apply_patch(broken, {"condition": "x"}).condition == "x"


# --- JSON shape ------------------------------------------------------------------------------


def test_r12_5_rule_json_shape() -> None:
    body = rule_to_json(validate_rule(_text_rule(when=["telegram"], repeat="after:4"), now=T0))
    assert body == {
        "name": "no_markdown",
        "scope": "text",
        "condition": "",
        "negate": False,
        "when": ["telegram"],
        "text": "Plain text only.",
        "mode": "interrupt",
        "repeat": "after:4",
        "enabled": True,
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "seeded": False,
        "seed_version": None,
        "seed_hash": None,
    }
    json.dumps(body)


def test_r12_5_rule_json_of_a_stored_row_derives_mode_and_nulls_empty_repeat() -> None:
    body = rule_to_json(
        Rule(
            name="r",
            scope="tool:shell",
            text="t",
            repeat="",
            when=["client_ops"],
            updated_at=datetime(2026, 5, 1, 12, 0),
        )
    )
    assert body["mode"] == "remind" and body["repeat"] is None and body["when"] == ["client_ops"]
    assert body["updated_at"] == "2026-05-01T12:00:00+00:00"  # naive DB times are UTC


def test_r6_10_content_hash_follows_content_only() -> None:
    a = Rule(name="r", scope="text", text="t", when=("telegram", "picture"))
    b = Rule(
        name="r", scope="text", text="t", when=("picture", "telegram"), created_at=T0, enabled=False
    )
    assert content_hash(a) == content_hash(b)
    assert content_hash(a) != content_hash(
        Rule(name="r", scope="text", text="t2", when=("telegram", "picture"))
    )
