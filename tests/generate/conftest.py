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
from tests.helpers import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`python -m evacore serve` on a fresh SQLite database, for the module's tests."""
    data = tmp_path_factory.mktemp("served")
    srv = ServerProcess(data / "data", f"sqlite+aiosqlite:///{data / 'evacore.db'}",
                        MASTER_TOKEN).start()
    try:
        yield srv
    finally:
        srv.kill()
