"""The prompt's element list: a history added in one call is recorded as each of its
elements added, in order, and refuses an id the prompt holds (R2.15's change log)."""

from __future__ import annotations

import pytest

from evacore.pipeline.stages.base import record_changes
from evacore.pipeline.tour import Tour
from evacore.prompt.elements import Element, Prompt


def _el(i: str, kind: str = "history") -> Element:
    return Element(id=i, role="user", content=f"text {i}", source=i, kind=kind)


def test_r2_15_extend_adds_in_order_and_the_change_log_names_each() -> None:
    tour = Tour(chat_id="c", user_id=None, role="master")
    tour.prompt.append(_el("main", "system"))
    tour.prompt.extend([_el("history:a"), _el("history:b")])
    assert [el.id for el in tour.prompt] == ["main", "history:a", "history:b"]
    record_changes(tour, "character", "stage")
    assert tour.diagnostics["changes"][-1]["added"] == ["main", "history:a", "history:b"]


def test_r2_15_extend_refuses_an_id_the_prompt_holds() -> None:
    prompt = Prompt([_el("history:a")])
    with pytest.raises(ValueError, match="history:a"):
        prompt.extend([_el("history:b"), _el("history:a")])
    with pytest.raises(ValueError, match="history:c"):
        prompt.extend([_el("history:c"), _el("history:c")])


def test_a_stored_message_becomes_the_element_its_fields_say() -> None:
    """A stored message's element is made by position (a long chat makes hundreds a tour):
    it must be the element the same fields make by name, whatever order `Element` keeps."""
    from evacore.pipeline.stages.character import history_elements
    from evacore.store.chats import HistoryMessage

    for role, made_role in (("user", "user"), ("system", "system"), ("assistant", "assistant")):
        m = HistoryMessage("m1", 7, role, "Ann", "hello")
        assert history_elements(m) == [Element(
            id="history:m1", role=made_role, content="hello", source="history:m1",
            kind="history", group="msg:m1", meta={"position": 7, "speaker": "Ann"})]
