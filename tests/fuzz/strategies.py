"""Hypothesis strategies for the JSON a client sends as chat settings, connection or request
params, images and env: mostly plausible values for the keys evacore reads, mixed with
every hazard found so far (wrong types, integers past 64 bits, NaN, deep nesting, null)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from evacore.domain.chat_settings import AuthorsNote, ChatSettings
from evacore.domain.connection_params import PROMPT_ORDER_KEYS, ConnectionParams, RequestParams
from evacore.domain.roles import ENV_FLAGS


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**66), max_value=2**66),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
) | st.just(_deep(40))

orders = st.lists(st.sampled_from(PROMPT_ORDER_KEYS), unique=True, min_size=1, max_size=6)
seconds = st.floats(min_value=0.05, max_value=120)
plausible = st.one_of(
    st.floats(min_value=0, max_value=2), st.integers(min_value=-2, max_value=300),
    st.booleans(), st.text(max_size=30), orders,
    st.sampled_from(["auto", "none", "max_tokens", "max_completion_tokens", "system", "user"]),
    st.fixed_dictionaries({}, optional={k: seconds for k in ("connect", "first_token", "idle",
                                                             "total")}),
    st.dictionaries(st.sampled_from(["X-Title", "X-Org", "bad header"]),
                    st.text(max_size=10), max_size=2),
    st.lists(st.text(max_size=5), max_size=3),
)
value_for_a_key = st.one_of(plausible, plausible, json_values)


def objects(model: Any, extra: list[str] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Objects whose keys are mostly the model's own, each with a plausible or wild value."""
    keys = st.sampled_from(sorted(model.model_fields) + (extra or [])) | st.text(max_size=8)
    return st.dictionaries(keys, value_for_a_key, max_size=5)


notes = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=20) | json_values,
    "interval": st.integers(-1, 5) | json_values,
    "depth": st.integers(-1, 6) | json_values,
    "role": st.sampled_from(["system", "user", "assistant", "narrator"]),
    "position": st.sampled_from(["in_chat", "top", "bottom", "middle"]),
    "scan": st.booleans() | json_values,
}) | json_values
assert set(AuthorsNote.model_fields) == {"text", "interval", "depth", "role", "position", "scan"}

chat_settings = st.builds(
    lambda base, note: {**base, **({"authors_note": note} if note is not None else {})},
    objects(ChatSettings), st.none() | notes,
)
connection_params = objects(ConnectionParams)
request_params = objects(RequestParams)

IMAGE = "data:image/png;base64,iVBORw0KGgo="
images = st.lists(st.one_of(
    st.just(IMAGE), st.just("https://example.org/cat.png"),
    st.fixed_dictionaries({"url": st.just(IMAGE)},
                          optional={"detail": st.sampled_from(["auto", "low", "high", "x"])}),
    st.sampled_from(["data:text/plain;base64,aGk=", "cat.png", "http://",
                     "data:image/png;base64,"]),
    json_values,
), max_size=3)
env = st.dictionaries(st.sampled_from(list(ENV_FLAGS)) | st.text(max_size=6),
                      st.booleans() | json_values, max_size=3)
