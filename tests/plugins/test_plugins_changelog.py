"""The host-computed change log (R2.15, R3.6): diffs by element id, compact JSON."""

from __future__ import annotations

import json

from evacore.prompt.changelog import TEXT_LIMIT, ChangeLog, ChangeRecord, diff_elements
from tests.plugins.conftest import element


def test_r2_15_diff_by_id_reports_added_removed_changed_and_moved() -> None:
    before = [element("a", content="A"), element("b", content="B"), element("c", content="C"),
              element("d", content="D")]
    after = [element("c", content="C"), element("a", content="A2"), element("x", content="X"),
             element("d", content="D")]
    changes = diff_elements(before, after)
    assert [e["id"] for e in changes.added] == ["x"]
    assert [e["id"] for e in changes.removed] == ["b"]
    assert changes.changed == [{"id": "a", "before": {"content": "A"}, "after": {"content": "A2"}}]
    assert changes.moved == ["c"]
    assert not diff_elements(before, [dict(e) for e in before])


def test_r2_15_change_log_json_is_compact_and_cuts_long_text() -> None:
    log = ChangeLog()
    long = "x" * (TEXT_LIMIT + 10)
    log.record("lorebook", "stage", [], [element("lore:1", "system", long, kind="lore")])
    log.append(ChangeRecord("plugin_interceptors", "stage", order=["a.h"], skipped=[{"hook": "a.h",
                                                                                     "reason": "plugin disabled"}]))
    out = log.to_json()
    json.dumps(out)
    added = out[0]["added"][0]["content"]
    assert added.endswith("…[cut 10 chars]") and len(added) < TEXT_LIMIT + 20
    assert out[1] == {"stage": "plugin_interceptors", "actor": "stage", "skipped": [
        {"hook": "a.h", "reason": "plugin disabled"}], "order": ["a.h"]}
    assert [r.stage for r in log.for_stage("lorebook")] == ["lorebook"]


def test_r2_15_diff_of_a_prompt_of_200_elements_names_each_change() -> None:
    # its speed is a target of the benchmarks (bench_dispatch: changelog_diff_200_elements)
    before = [element(f"e{i}", content=f"text {i} " * 30) for i in range(200)]
    after = [dict(e) for e in before]
    after[10]["content"] = "changed"
    after.insert(50, element("new", content="n"))
    del after[150]
    after.append(after.pop(3))
    changes = diff_elements(before, after)
    assert [c["id"] for c in changes.changed] == ["e10"] and changes.moved == ["e3"]
    assert [e["id"] for e in changes.added] == ["new"]
    assert [e["id"] for e in changes.removed] == ["e149"]
