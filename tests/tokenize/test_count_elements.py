"""Stage 6 counts each prompt element as its text and its fixed extras say (`_parts`):
a stored message's plain text, counted the short way, comes to the same count as any other
element's, per role, whatever the element carries besides."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from evacore.pipeline.stages.token_count import Frame, _parts, count_elements
from evacore.prompt.elements import Element
from evacore.tokenize.cache import CountCache, cached_count
from evacore.tokenize.profile import HeuristicProfile


def _history(id: str, role: str, content: Any, **more: Any) -> Element:
    return Element(id=f"history:{id}", role=role, content=content, source=f"history:{id}",
                   kind="history", group=f"msg:{id}", **more)


async def test_every_element_counts_its_text_and_extras_whichever_way_it_is_counted() -> None:
    frame = Frame(user=3, assistant=5, system=7, story=11)  # each role's extra tells apart
    profile, cache = HeuristicProfile(), CountCache()
    elements = [
        Element(id="main", role="system", content="You are {{char}}.", source="main",
                kind="main"),
        _history("1", "user", "Hello there, how are you?"),
        _history("2", "assistant", "Fine, thanks. And you?"),
        _history("3", "system", "A note from the narrator."),
        _history("4", "user", "Named.", name="Ann"),
        _history("5", "user", [{"type": "text", "text": "Look"},
                               {"type": "image_url", "image_url": {"url": "data:x"}}]),
        _history("6:step0", "assistant", "calling", tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
        Element(id="history:7", role="user", content="the input", source="history:7",
                kind="input"),
    ]
    expected = [cached_count(cache, profile, text) + extra
                for text, extra in (_parts(el, frame) for el in elements)]
    tour = SimpleNamespace(prompt=elements, data={"tokenizer": profile, "text_frame": frame})
    core = SimpleNamespace(count_cache=cache)
    total = await count_elements(core, tour)  # type: ignore[arg-type]
    assert [el.tokens for el in elements] == expected
    assert total == frame.fixed + sum(expected)
    assert elements[1].tokens == cached_count(cache, profile, "Hello there, how are you?") + 3
    assert elements[2].tokens - cached_count(cache, profile, "Fine, thanks. And you?") == 5
    assert elements[3].tokens - cached_count(cache, profile, "A note from the narrator.") == 7
