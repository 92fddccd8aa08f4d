"""R5.3 / §13: how a stored tool result looks in a prompt."""

from evacore.render.tool_results import CUT_NOTE, EMPTY_MARKER, cut_output, prompt_result


def test_r5_3_empty_output_is_the_marker_in_prompts() -> None:
    assert EMPTY_MARKER == "(empty)"
    assert prompt_result("") == "(empty)"
    assert prompt_result(" ") == " "


def test_r5_3_output_over_the_cap_is_cut_with_a_note() -> None:
    output = "x" * 32345
    shown = prompt_result(output, max_chars=20000)
    assert shown == "x" * 20000 + "\n[… cut 12345 of 32345 characters]"
    assert shown.endswith(CUT_NOTE.format(cut=12345, total=32345))


def test_r5_3_output_at_the_cap_is_unchanged() -> None:
    assert prompt_result("ab", max_chars=2) == "ab"
    assert cut_output("", 5) == ""
    assert cut_output("abc", 2) == "ab\n[… cut 1 of 3 characters]"
