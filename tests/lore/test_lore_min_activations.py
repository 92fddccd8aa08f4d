"""R2.4 min activations: the scan widens one message at a time until enough entries fire."""

from __future__ import annotations

from lore_helpers import book, chat, entry, run, uids

from evacore.lore import WorldInfoSettings


def old_dragon() -> list:
    return chat("a dragon", "one", "two", "three", "four")


def test_r2_4_min_activations_widens_scan_depth() -> None:
    b = book(entry(1, ["dragon"]))
    assert uids(run(b, old_dragon())) == []
    r = run(b, old_dragon(), settings=WorldInfoSettings(min_activations=1))
    assert uids(r) == [1]
    assert r.diagnostics["scan_depth"] == 5
    assert r.activated[0].reasons[0] == "key 'dragon' in message 4 (User)"
    assert "min activations" in r.activated[0].reasons[-1]


def test_r2_4_min_activations_depth_max_stops_widening() -> None:
    b = book(entry(1, ["dragon"]))
    s = WorldInfoSettings(min_activations=1, min_activations_depth_max=3)
    assert uids(run(b, old_dragon(), settings=s)) == []


def test_r2_4_min_activations_stops_at_chat_length() -> None:
    r = run(book(entry(1, ["dragon"])), chat("one", "two"), settings=WorldInfoSettings(min_activations=3))
    assert uids(r) == [] and r.diagnostics["passes"] <= 3


def test_r2_4_min_activations_satisfied_stops_early() -> None:
    b = book(entry(1, ["four"]), entry(2, ["dragon"]))
    r = run(b, old_dragon(), settings=WorldInfoSettings(min_activations=1))
    assert uids(r) == [1] and r.diagnostics["passes"] == 1
