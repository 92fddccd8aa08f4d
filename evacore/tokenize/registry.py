"""Turn a connection's tokenizer spec (SPEC §13) or its model name into a profile.

Must not: download vocab files; an unavailable exact tokenizer in automatic mode falls back
to the heuristic, but an explicit spec that cannot be honoured is an `InvalidInput`.
"""

from __future__ import annotations

import re
import threading

import httpx
import structlog

from evacore.errors import InvalidInput
from evacore.tokenize._vocab import OPENAI_ENCODINGS, mistral_file, quicktok_data
from evacore.tokenize.local import hf_profile, tiktoken_profile
from evacore.tokenize.profile import HeuristicProfile, TokenizerProfile
from evacore.tokenize.remote import RemoteProfile, root_url

log = structlog.get_logger(__name__)

_HEURISTIC = HeuristicProfile()
_REMOTE: dict[tuple[str, str | None], RemoteProfile] = {}
_REMOTE_LOCK = threading.Lock()

# model-name patterns (lower case, matched anywhere, first hit wins) → tokenizer spec
MODEL_RULES: tuple[tuple[str, str], ...] = (
    (r"gpt-oss", "tiktoken:o200k_harmony"),
    (r"gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|(^|[/:\s])o[1345](-|$)|omni", "tiktoken:o200k_base"),
    (r"gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada", "tiktoken:cl100k_base"),
    (r"llama[-_ ]?3(?!\d)", "hf:llama3"),
    (r"qwen[-_ ]?(2|3)", "hf:qwen3"),
    (r"mistral[-_ ]?nemo|(^|[/-])nemo", "hf:mistral-nemo"),
    ((r"pixtral|ministral|magistral|devstral|voxtral|mistral[-_ ]?small[-_ ]?(3|24b)"
      r"|mistral[-_ ]?medium|mistral-small-25|mistral.*-25\d\d"), "hf:mistral-tekken"),
    (r"mistral|mixtral|codestral", "hf:mistral-v3"),
)


def spec_for_model(model: str | None) -> str:
    """The tokenizer spec automatic mode picks for a model name."""
    name = (model or "").lower()
    for pattern, spec in MODEL_RULES:
        if re.search(pattern, name):
            return spec
    return "heuristic"


def get_profile(
    spec: str | None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> TokenizerProfile:
    """A profile for `"heuristic"`, `"tiktoken:<encoding>"`, `"hf:<name or path>"`,
    `"remote"`, or None (chosen from `model`, falling back to the heuristic)."""
    if spec is None or spec == "" or spec == "auto":
        chosen = spec_for_model(model)
        if chosen == "heuristic":
            return _HEURISTIC
        try:
            return get_profile(chosen)
        except InvalidInput as exc:
            log.info("tokenize.auto_fallback", model=model, wanted=chosen, reason=exc.message)
            return _HEURISTIC
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "heuristic" and not arg:
        return _HEURISTIC
    if kind == "tiktoken":
        if arg not in OPENAI_ENCODINGS:
            raise InvalidInput(
                f"unknown tiktoken encoding {arg!r}; available: {', '.join(OPENAI_ENCODINGS)}"
            )
        return tiktoken_profile(arg)
    if kind == "hf" and arg:
        return hf_profile(arg)
    if kind == "remote":
        url = arg or base_url
        if not url:
            raise InvalidInput("the remote tokenizer needs the connection's base_url")
        key = (root_url(url), model)
        with _REMOTE_LOCK:
            profile = _REMOTE.get(key)
            if profile is None:
                profile = _REMOTE[key] = RemoteProfile(url, model=model, http_client=http_client)
            elif http_client is not None:
                profile.http_client = http_client
        return profile
    raise InvalidInput(
        f"unknown tokenizer {spec!r}: use heuristic, tiktoken:<encoding>, hf:<name or path>, "
        "or remote"
    )


def available_local() -> dict[str, bool]:
    """Which bundled tokenizers can load here (for diagnostics and the settings page)."""
    has_vocab = quicktok_data() is not None
    has_mistral = mistral_file("tekken_240911.json") is not None
    try:
        import sentencepiece  # noqa: F401

        has_sp = True
    except ImportError:
        has_sp = False
    return {
        "tiktoken:o200k_base": has_vocab,
        "tiktoken:cl100k_base": has_vocab,
        "tiktoken:o200k_harmony": has_vocab,
        "hf:llama3": has_vocab,
        "hf:qwen3": has_vocab,
        "hf:mistral-tekken": has_mistral,
        "hf:mistral-nemo": has_mistral,
        "hf:mistral-v3": has_mistral and has_sp,
    }
