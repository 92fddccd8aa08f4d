"""Fixtures for the pipeline tests that go through a whole tour: the loopback fake upstreams."""

from tests.fakes.fixtures import openai_fake  # noqa: F401 - fixtures are found by name
