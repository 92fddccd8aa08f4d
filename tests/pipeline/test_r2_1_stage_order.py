"""R2.1: the fourteen stages run in one fixed order, numbered 1 to 14; stages 10–12 repeat per
step inside the loop. Pinned exactly: swapping two stages fails here."""

from __future__ import annotations

from evacore.pipeline.runner import ASSEMBLE, FINISH, STAGES, STEP

ORDER = [
    (1, "user_input"), (2, "macros"), (3, "character"), (4, "lorebook"), (5, "memory"),
    (6, "token_count"), (7, "context_shift"), (8, "interceptors"), (9, "instruct"),
    (10, "serialize"), (11, "request"), (12, "streaming"), (13, "postprocess"), (14, "save"),
]


def test_r2_1_the_stages_run_in_the_fixed_order() -> None:
    assert [(s.number, s.name) for s in STAGES] == ORDER
    assert [s.number for s in ASSEMBLE] == list(range(1, 10))
    assert [s.number for s in STEP] == [10, 11, 12]
    assert [s.number for s in FINISH] == [13, 14]
