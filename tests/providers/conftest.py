"""Fixtures for the adapter tests: the loopback fakes and a loopback-only client."""

from tests.fakes.fixtures import (  # noqa: F401 - fixtures are found by name
    anthropic_fake,
    http_client,
    kobold_fake,
    llamacpp_fake,
    openai_fake,
    openai_text_fake,
)
