"""Fixtures for the end-to-end generate tests: the loopback fake upstreams, and a real
`evacore serve` on SQLite shared by a module's tests."""

from collections.abc import Iterator

import pytest

from tests.conftest import MASTER_TOKEN
from tests.fakes.fixtures import (  # noqa: F401 - fixtures are found by name
    anthropic_fake,
    kobold_fake,
    openai_fake,
    openai_text_fake,
)
from tests.helpers import ServerProcess, served_on_sqlite


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`python -m evacore serve` on a fresh SQLite database, for the module's tests."""
    yield from served_on_sqlite(tmp_path_factory, "served", MASTER_TOKEN)
