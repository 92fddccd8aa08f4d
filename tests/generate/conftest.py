"""Fixtures for the end-to-end generate tests: the loopback fake upstreams."""

from tests.fakes.fixtures import (  # noqa: F401 - fixtures are found by name
    anthropic_fake,
    kobold_fake,
    openai_fake,
    openai_text_fake,
)
