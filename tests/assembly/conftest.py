"""Fixtures for the prompt-assembly tests: the loopback fake text-completion upstream."""

from tests.fakes.fixtures import openai_text_fake  # noqa: F401 - fixtures are found by name
