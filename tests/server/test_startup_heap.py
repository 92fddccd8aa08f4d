"""`evacore serve` keeps its start-up heap out of the garbage collector's full passes and
collects its youngest objects less often; an app built inside another program (tests, the
terminal's embedded server) leaves that program's collector alone."""

from __future__ import annotations

import gc

import pytest

from evacore.config import Settings
from evacore.server.app import YOUNG_COLLECTION_AT, create_app
from tests.conftest import wipe


@pytest.fixture
def unfrozen() -> object:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_a_serving_app_freezes_what_start_up_built(settings: Settings,
                                                         unfrozen: object) -> None:
    await wipe(settings.db_url)
    app = create_app(settings, serving=True)
    assert gc.get_freeze_count() == 0
    async with app.router.lifespan_context(app):
        frozen = gc.get_freeze_count()
        # the interpreter, the libraries and the core: far more than a full pass should walk
        assert frozen > 50_000
        assert gc.collect(2) >= 0 and gc.get_freeze_count() == frozen
        assert gc.get_threshold()[0] == YOUNG_COLLECTION_AT != 700


async def test_an_app_built_by_another_program_leaves_its_collector_alone(
        settings: Settings, unfrozen: object) -> None:
    await wipe(settings.db_url)
    thresholds = gc.get_threshold()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == thresholds
