"""Typed `params` of a connection (R12.2) and of a generate request (R8.3): every key that
evacore or an adapter reads has its type and range checked; other keys pass through to the
provider untouched, as long as they are JSON values evacore can carry (json_values.py).

At the door, `ConnectionParamsField` / `RequestParamsField` refuse what does not fit (the
API answers 422 and stores nothing). On the read side, `read_connection_params` drops each
bad key of a row stored before these checks existed, with a warning for the tour's
diagnostics, so the adapter's default applies and the tour runs instead of failing.
`bounded_max_tokens` keeps a non-master's request within the connection's `max_tokens`.

Must not: read storage or know adapters' wire formats (the adapters send what they know).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from evacore.domain._typed import ABSENT, check_object, invalid, object_schema, read_object

MAX_TOKENS_LIMIT = 1_000_000
"""The most tokens an answer may ask for (the connection's own `max_tokens` has this cap)."""

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Probability = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(strict=True, ge=0, le=1_000_000, allow_inf_nan=False)]
Penalty = Annotated[float, Field(strict=True, ge=-100, le=100, allow_inf_nan=False)]
Int64 = Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)]
Count = Annotated[int, Field(strict=True, ge=-1, le=2**63 - 1)]
"""A token count where -1 means "all" (llama.cpp's `repeat_last_n`, KoboldCpp's ranges)."""
Seconds = Annotated[float, Field(strict=True, gt=0, le=86_400, allow_inf_nan=False)]
Text = Annotated[str, Field(strict=True, max_length=1_000_000)]
Short = Annotated[str, Field(strict=True, max_length=1000)]
HeaderName = Annotated[str, StringConstraints(strict=True,
                                              pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")]
HeaderValue = Annotated[str, StringConstraints(
    strict=True, max_length=8000,
    pattern=r"^(?:[\t\x20-\x7e]*|…[\x20-\x7e]{0,8})$")]
"""Printable ASCII, or the masked form `…abcd` a read shows (sent back, it keeps the secret)."""
PromptKey = Literal[
    "main", "wi_before", "persona", "description", "personality", "scenario", "wi_after",
    "examples", "history", "post_history",
]
"""What a `prompt_order` may list (stage 3's prompt-manager order), each at most once."""
PROMPT_ORDER_KEYS: tuple[str, ...] = get_args(PromptKey)


def _unique(order: list[str]) -> list[str]:
    if len(set(order)) != len(order):
        raise invalid("each prompt_order key may appear once")
    return order


def _stop(value: Any) -> Any:
    if isinstance(value, str) and len(value) <= 1000:
        return value
    if (isinstance(value, list) and len(value) <= 256
            and all(isinstance(v, str) and len(v) <= 1000 for v in value)):
        return value
    raise invalid("must be a string or a list of at most 256 strings (1000 characters each)")


def _logprobs(value: Any) -> Any:
    if isinstance(value, bool) or (isinstance(value, int) and 0 <= value <= 100):
        return value
    raise invalid("must be true, false or a whole number from 0 to 100")


def _tool_choice(value: Any) -> Any:
    if (isinstance(value, str) and len(value) <= 1000) or isinstance(value, dict):
        return value
    raise invalid("must be a string (auto, none, required) or an object")


def _either(check: Any, schema: dict[str, Any]) -> Any:
    """A value of several JSON types, checked by one function (one clear message)."""
    return Annotated[Any, AfterValidator(check), WithJsonSchema(schema)]


Stop = _either(_stop, {"anyOf": [{"type": "string", "maxLength": 1000},
                                 {"type": "array", "maxItems": 256,
                                  "items": {"type": "string", "maxLength": 1000}}]})
LogProbs = _either(_logprobs, {"anyOf": [{"type": "boolean"},
                                         {"type": "integer", "minimum": 0, "maximum": 100}]})
ToolChoice = _either(_tool_choice, {"anyOf": [{"type": "string", "maxLength": 1000},
                                              {"type": "object"}]})

PromptOrder = Annotated[list[PromptKey], Field(max_length=len(PROMPT_ORDER_KEYS)),
                        AfterValidator(_unique)]


class Timeouts(BaseModel):
    """Seconds, each above 0 and at most a day (docs/providers.md "Timeouts")."""

    model_config = ConfigDict(extra="forbid", strict=True)
    connect: Seconds = ABSENT
    first_token: Seconds = ABSENT
    idle: Seconds = ABSENT
    total: Seconds = ABSENT


class SamplerParams(BaseModel):
    """Sampler and request settings a connection or a request may set (a key that is left
    out takes the backend's default; `null` is not a value). Unknown keys are allowed."""

    model_config = ConfigDict(extra="allow", strict=True)
    temperature: Annotated[float, Field(strict=True, ge=0, le=100, allow_inf_nan=False)] = ABSENT
    top_p: Probability = ABSENT
    min_p: Probability = ABSENT
    top_a: Probability = ABSENT
    typical_p: Probability = ABSENT
    typical: Probability = ABSENT
    tfs: Probability = ABSENT
    tfs_z: Probability = ABSENT
    xtc_threshold: Probability = ABSENT
    xtc_probability: Probability = ABSENT
    top_k: Count = ABSENT
    repetition_penalty: NonNegative = ABSENT
    repeat_penalty: NonNegative = ABSENT
    rep_pen: NonNegative = ABSENT
    rep_pen_range: Count = ABSENT
    repeat_last_n: Count = ABSENT
    frequency_penalty: Penalty = ABSENT
    presence_penalty: Penalty = ABSENT
    mirostat: Annotated[int, Field(strict=True, ge=0, le=2)] = ABSENT
    mirostat_tau: NonNegative = ABSENT
    mirostat_eta: NonNegative = ABSENT
    seed: Int64 = ABSENT
    sampler_seed: Int64 = ABSENT
    stop: Stop = ABSENT
    max_tokens: Annotated[int, Field(strict=True, ge=1, le=MAX_TOKENS_LIMIT)] = ABSENT
    min_tokens: Annotated[int, Field(strict=True, ge=0, le=MAX_TOKENS_LIMIT)] = ABSENT
    logit_bias: dict[str, Number] = ABSENT
    logprobs: LogProbs = ABSENT
    top_logprobs: Annotated[int, Field(strict=True, ge=0, le=100)] = ABSENT
    n_probs: Annotated[int, Field(strict=True, ge=0, le=1000)] = ABSENT
    tool_choice: ToolChoice = ABSENT
    parallel_tool_calls: bool = ABSENT
    response_format: dict[str, Any] = ABSENT
    json_schema: dict[str, Any] = ABSENT
    grammar: Text = ABSENT
    user: Short = ABSENT
    reasoning_effort: Short = ABSENT
    service_tier: Short = ABSENT
    verbosity: Short = ABSENT
    metadata: dict[str, Any] = ABSENT
    store: bool = ABSENT
    ignore_eos: bool = ABSENT
    cache_prompt: bool = ABSENT
    skip_special_tokens: bool = ABSENT
    include_reasoning: bool = ABSENT
    chat_template_kwargs: dict[str, Any] = ABSENT
    thinking: dict[str, Any] = ABSENT
    sampler_order: Annotated[list[Annotated[int, Field(strict=True, ge=0, le=100)]],
                             Field(max_length=100)] = ABSENT
    banned_tokens: list[Short] = ABSENT
    suffix: Text = ABSENT


class ConnectionParams(SamplerParams):
    """A connection's `params`: samplers, plus what evacore and the adapters read from it
    (docs/providers.md "Adapter switches", "Timeouts, retries"; prompt defaults of stage 3;
    the mock provider's script)."""

    timeouts: Timeouts = ABSENT
    retries: Annotated[int, Field(strict=True, ge=0, le=20)] = ABSENT
    retry_backoff: Annotated[float, Field(strict=True, ge=0, le=60, allow_inf_nan=False)] = ABSENT
    retry_after_cap: Annotated[float, Field(strict=True, ge=0, le=3600,
                                            allow_inf_nan=False)] = ABSENT
    extra_body: dict[str, Any] = ABSENT
    extra_headers: Annotated[dict[HeaderName, HeaderValue], Field(max_length=100)] = ABSENT
    stream_usage: bool = ABSENT
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = ABSENT
    prefill_as_assistant: bool = ABSENT
    assistant_prefix: bool = ABSENT
    prompt_cache: bool = ABSENT
    anthropic_version: HeaderValue = ABSENT
    prompt_order: PromptOrder = ABSENT
    system_prompt: Text = ABSENT
    post_history: Text = ABSENT
    impersonate_prompt: Text = ABSENT
    personality_format: Text = ABSENT
    scenario_format: Text = ABSENT
    wi_format: Text = ABSENT
    new_chat_prompt: Text = ABSENT
    new_example_chat_prompt: Text = ABSENT
    continue_nudge_prompt: Text = ABSENT
    continue_prefill: bool = ABSENT
    continue_postfix: Literal["", " ", "\n", "\n\n"] = ABSENT
    human_sysprompt_message: Text = ABSENT
    script: Annotated[list[dict[str, Any]], Field(max_length=1000)] = ABSENT
    tokens_per_delta: Annotated[int, Field(strict=True, ge=1, le=10_000)] = ABSENT


class RequestParams(SamplerParams):
    """A generate request's `params`: samplers (sent for this tour only), `max_tokens`
    (bounded by the connection's for a non-master), `max_steps` (may lower the agent's step
    limit, never raise it) and `prefill`."""

    max_steps: Annotated[int, Field(strict=True, ge=1, le=10_000)] = ABSENT
    prefill: Annotated[str, Field(strict=True, max_length=100_000)] = ABSENT


def check_connection_params(value: Any) -> dict[str, Any]:
    """A connection's `params` as given, or a validation error naming the first bad keys."""
    return check_object(ConnectionParams, value)


def check_request_params(value: Any) -> dict[str, Any]:
    """A generate request's `params` as given, or a validation error naming the first bad
    keys."""
    return check_object(RequestParams, value)


def read_connection_params(value: Any) -> tuple[dict[str, Any], list[str]]:
    """A stored connection's `params` with every key that does not fit left out (its
    default applies), and a warning per key left out."""
    return read_object(ConnectionParams, value, "connection params")


def bounded_max_tokens(asked: Any, connection_max: int, *, master: bool) -> int:
    """The `max_tokens` a step sends: the request's when given, but never above the
    connection's for anyone but the master (roles, SPEC §1: a guest cannot raise the
    connection's limit). A value that is not a whole number from 1 is not a request."""
    if isinstance(asked, bool) or not isinstance(asked, int) or not 1 <= asked <= MAX_TOKENS_LIMIT:
        return connection_max
    return asked if master else min(asked, connection_max)


ConnectionParamsField = Annotated[dict[str, Any], AfterValidator(check_connection_params),
                                  WithJsonSchema(object_schema(ConnectionParams))]
RequestParamsField = Annotated[dict[str, Any], AfterValidator(check_request_params),
                               WithJsonSchema(object_schema(RequestParams))]
