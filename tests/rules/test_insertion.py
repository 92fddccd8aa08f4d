"""R5.3, R6.5, §13: what a tool result looks like in the prompt copy, reminders included."""

from __future__ import annotations

from evacore.render.tool_results import CUT_NOTE, EMPTY_MARKER
from evacore.rules import insert_reminders, reminder_block


def test_r6_5_reminder_goes_on_top_followed_by_a_newline() -> None:
    assert insert_reminders("file written", [("r", "Use write_diff.")], max_chars=100) == (
        '<system-reminder rule="r">Use write_diff.</system-reminder>\nfile written'
    )
    assert reminder_block("r", "T") == '<system-reminder rule="r">T</system-reminder>'


def test_r5_3_empty_output_without_reminder_gets_the_marker() -> None:
    assert insert_reminders("", [], max_chars=100) == EMPTY_MARKER == "(empty)"


def test_r13_empty_output_with_a_reminder_gets_no_marker() -> None:
    assert (
        insert_reminders("", [("r", "T")], max_chars=100)
        == '<system-reminder rule="r">T</system-reminder>\n'
    )


def test_r6_5_cap_counts_the_tool_output_not_the_reminder() -> None:
    output = "0123456789" * 3
    text = "a long reminder " * 10
    result = insert_reminders(output, [("r", text)], max_chars=10)
    head, body = result.split("\n", 1)
    assert head == f'<system-reminder rule="r">{text}</system-reminder>'
    assert body == "0123456789" + CUT_NOTE.format(cut=20, total=30)
    assert "20" in body and "30" in body


def test_r5_3_output_within_the_cap_is_unchanged() -> None:
    assert insert_reminders("x" * 10, [], max_chars=10) == "x" * 10
    assert insert_reminders("x" * 50, [], max_chars=None) == "x" * 50


def test_r6_5_several_reminders_stack_in_order() -> None:
    result = insert_reminders("out", [("a", "A"), ("b", "B")], max_chars=100)
    assert result == (
        '<system-reminder rule="a">A</system-reminder>\n'
        '<system-reminder rule="b">B</system-reminder>\nout'
    )


def test_r6_5_a_literal_empty_marker_output_is_left_as_the_tool_gave_it() -> None:
    assert insert_reminders("(empty)", [("r", "T")], max_chars=100).endswith("\n(empty)")
