"""Properties of the typed shapes (domain/): what the door accepts can be carried (orjson,
PostgreSQL JSON) and is read back unchanged; reading a stored value never raises, and
what it keeps is again accepted at the door; a non-master never exceeds the connection's
`max_tokens`. Pure functions, so many examples run in a second or two."""

from __future__ import annotations

import json
import os
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from evacore.domain.chat_settings import check_chat_settings, read_chat_settings
from evacore.domain.connection_params import (
    bounded_max_tokens,
    check_connection_params,
    check_request_params,
    read_connection_params,
)
from evacore.domain.images import Images, image_part
from evacore.domain.json_values import json_problem
from evacore.domain.roles import EnvOverrides
from tests.fuzz import strategies as fz

EXAMPLES = int(os.environ.get("EVACORE_PROPERTY_EXAMPLES", "100"))
THOROUGH = 2000
RUNS = [pytest.param(EXAMPLES, id="quick"),
        pytest.param(THOROUGH, id="thorough", marks=[pytest.mark.slow, pytest.mark.timeout(900)])]


def _accepts(check: Any, value: Any) -> bool:
    try:
        assert check(value) is value
    except ValueError:  # pydantic's errors outside a model are ValueErrors too
        return False
    return True


def _run(prop: Any, examples: int) -> None:
    settings(max_examples=examples, deadline=None, database=None)(prop)()


@given(fz.json_values)
def _serialises(value: Any) -> None:
    if json_problem(value) is None:
        orjson.dumps(value)
        json.dumps(value, allow_nan=False)  # PostgreSQL's JSON refuses NaN and Infinity


@pytest.mark.parametrize("examples", RUNS)
def test_r8_a_value_without_json_problems_serialises_everywhere(examples: int) -> None:
    _run(_serialises, examples)


def _read_keeps_what_the_door_accepts(check: Any, read: Any) -> Any:
    def prop(value: dict[str, Any]) -> None:
        kept, problems = read(value)
        if _accepts(check, value):
            assert (kept, problems) == (value, [])
        else:
            assert problems, "what the door refuses is named when it is read"
        assert _accepts(check, kept), (value, kept)
        assert read(kept) == (kept, [])

    return prop


@pytest.mark.parametrize("examples", RUNS)
def test_r8_chat_settings_read_keeps_what_the_door_accepts_and_never_raises(examples: int
                                                                            ) -> None:
    prop = _read_keeps_what_the_door_accepts(check_chat_settings, read_chat_settings)
    _run(given(fz.chat_settings)(prop), examples)


@pytest.mark.parametrize("examples", RUNS)
def test_r12_2_connection_params_read_keeps_what_the_door_accepts_and_never_raises(
    examples: int
) -> None:
    prop = _read_keeps_what_the_door_accepts(check_connection_params, read_connection_params)
    _run(given(fz.connection_params)(prop), examples)


@pytest.mark.parametrize("examples", RUNS)
def test_r8_3_accepted_request_params_carry_and_type_what_tours_read(examples: int) -> None:
    _run(_request_params, examples)


@given(fz.request_params)
def _request_params(value: dict[str, Any]) -> None:
    if not _accepts(check_request_params, value):
        return
    orjson.dumps(value)
    if "max_tokens" in value:
        assert isinstance(value["max_tokens"], int) and value["max_tokens"] >= 1
    if "max_steps" in value:
        assert isinstance(value["max_steps"], int) and value["max_steps"] >= 1
    if "prefill" in value:
        assert isinstance(value["prefill"], str)


_IMAGES = TypeAdapter(Images)
_ENV = TypeAdapter(EnvOverrides)


@pytest.mark.parametrize("examples", RUNS)
def test_r8_3_an_accepted_image_always_reaches_the_prompt(examples: int) -> None:
    _run(_images, examples)


@given(fz.images)
def _images(images: list[Any]) -> None:
    parts = [image_part(img) for img in images]  # never raises, whatever was stored
    try:
        accepted = _IMAGES.validate_python(images)
    except ValidationError:
        return
    assert accepted == images
    assert all(p is not None and p["image_url"]["url"] for p in parts)


@pytest.mark.parametrize("examples", RUNS)
def test_r8_3_env_is_accepted_only_as_booleans_of_known_flags(examples: int) -> None:
    _run(_env, examples)


@given(fz.env)
def _env(env: dict[str, Any]) -> None:
    try:
        _ENV.validate_python(env)
    except ValidationError:
        assert any(k not in fz.ENV_FLAGS or not isinstance(v, bool) for k, v in env.items())
        return
    assert all(k in fz.ENV_FLAGS and isinstance(v, bool) for k, v in env.items())


@pytest.mark.parametrize("examples", RUNS)
def test_roles_max_tokens_never_exceeds_the_connections_for_a_non_master(examples: int
                                                                         ) -> None:
    _run(_max_tokens, examples)


@given(asked=fz.json_values | st.integers(-5, 2_000_000), limit=st.integers(1, 100_000),
       master=st.booleans())
def _max_tokens(asked: Any, limit: int, master: bool) -> None:
    sent = bounded_max_tokens(asked, limit, master=master)
    assert isinstance(sent, int) and sent >= 1
    if not master:
        assert sent <= limit
    valid = isinstance(asked, int) and not isinstance(asked, bool) and 1 <= asked <= 1_000_000
    assert sent == (asked if master else min(asked, limit)) if valid else sent == limit
