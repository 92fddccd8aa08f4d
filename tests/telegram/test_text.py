"""The reply tail, Markdown → entities and the splitter, on their own (R14.2)."""

from __future__ import annotations

import pytest

from evacore.channels.telegram.reactions import canonical_reaction
from evacore.channels.telegram.text import Part, parts_of, render, split, split_tail, utf16_len


@pytest.mark.parametrize(("answer", "text", "reply"), [
    ("See you at ten. ↩ #1042", "See you at ten.", 1042),
    ("See you.\n↩️ #7  ", "See you.", 7),
    ("See you.↩#7", "See you.", 7),
    ("The tail ↩ #12 is not at the end.", "The tail ↩ #12 is not at the end.", None),
    ("No tail", "No tail", None),
])
def test_r14_2_the_reply_tail_is_read_and_removed(answer: str, text: str, reply: int | None) -> None:
    assert split_tail(answer) == (text, reply)


def test_r14_2_markdown_becomes_entities_in_utf16_offsets() -> None:
    part = render("😀 **bold** [site](https://example.org) and\n```python\nx = 1\n```")
    pieces = {(e["type"], part.text.encode("utf-16-le")[e["offset"] * 2:(e["offset"] + e[
        "length"]) * 2].decode("utf-16-le")) for e in part.entities}
    assert ("bold", "bold") in pieces and ("text_link", "site") in pieces
    assert ("pre", "x = 1") in pieces or ("pre", "x = 1\n") in pieces
    link = next(e for e in part.entities if e["type"] == "text_link")
    assert link["url"] == "https://example.org"
    assert "**" not in part.text and "```" not in part.text


def test_r14_2_text_that_is_not_markdown_is_sent_as_it_is() -> None:
    assert render("2 * 3 = 6 and a_b_c").text == "2 * 3 = 6 and a_b_c"
    assert parts_of("   ") == []


def test_r14_2_the_splitter_prefers_paragraphs_then_lines_then_spaces() -> None:
    para = "a" * 3000
    assert [p.text for p in split(Part(f"{para}\n\n{para}"))] == [para, para]
    assert [p.text for p in split(Part(f"{para}\n{para}"))] == [para, para]
    words = " ".join(["word"] * 2000)
    pieces = split(Part(words))
    assert all(utf16_len(p.text) <= 4096 for p in pieces)
    assert " ".join(p.text for p in pieces) == words
    # no boundary at all: cut anywhere, never inside a surrogate pair
    emoji = split(Part("😀" * 3000))
    assert "".join(p.text for p in emoji) == "😀" * 3000


def test_r14_2_entities_are_clipped_to_each_piece() -> None:
    text = "x" * 5000
    pieces = split(Part(text, [{"type": "bold", "offset": 4000, "length": 200}]))
    assert pieces[0].entities == [{"type": "bold", "offset": 4000, "length": 96}]
    assert pieces[1].entities == [{"type": "bold", "offset": 0, "length": 104}]


def test_r14_2_reactions_follow_telegrams_list() -> None:
    assert canonical_reaction("👍") == "👍"
    assert canonical_reaction("❤️") == "❤"  # the variation selector is dropped
    assert canonical_reaction("🦖") is None and canonical_reaction("ok") is None
