"""R2.6: the heuristic with its margin never undercounts, and model names pick profiles."""

from __future__ import annotations

import math

import pytest

from evacore.tokenize import HeuristicProfile, get_profile, heuristic_estimate, spec_for_model
from evacore.tokenize.profile import CHARS_PER_TOKEN, HEURISTIC_MARGIN

from .conftest import CORPUS

EXACT = ("tiktoken:o200k_base", "tiktoken:cl100k_base", "hf:llama3")


def _samples() -> list[tuple[str, str]]:
    """Each corpus file whole, and each of its paragraphs and lines alone."""
    samples = []
    for name, text in CORPUS.items():
        samples.append((name, text))
        samples += [(f"{name}/paragraph", p) for p in text.split("\n\n") if p.strip()]
        samples += [(f"{name}/line", line) for line in text.splitlines() if line.strip()]
    return samples


@pytest.mark.parametrize("spec", EXACT)
def test_r2_6_heuristic_never_undercounts_the_corpus(spec: str) -> None:
    exact = get_profile(spec)
    heuristic = get_profile("heuristic")
    for label, text in _samples():
        assert heuristic.count(text) >= exact.count(text), (label, text[:40])


def test_r2_6_heuristic_headroom_on_whole_texts() -> None:
    """The margin leaves ≥ 10% headroom on every whole text, without doubling English."""
    heuristic = HeuristicProfile()
    for name, text in CORPUS.items():
        worst = max(get_profile(spec).count(text) for spec in EXACT)
        assert heuristic.count(text) >= 1.10 * worst, name
        if name == "english":
            assert heuristic.count(text) <= 1.6 * worst


def test_r2_6_ascii_is_chars_over_3_35_times_margin() -> None:
    text = "x" * 335
    assert heuristic_estimate(text) == math.ceil(HEURISTIC_MARGIN * 335 / CHARS_PER_TOKEN)
    assert heuristic_estimate("") == 0
    assert heuristic_estimate("a") == 1
    assert HeuristicProfile().exact is False


def test_r2_6_cjk_is_not_undercounted_like_chars_over_3_35() -> None:
    text = CORPUS["chinese"]
    plain = len(text) / CHARS_PER_TOKEN
    assert heuristic_estimate(text) > 3 * plain


@pytest.mark.parametrize(
    ("model", "spec"),
    [
        ("gpt-4o", "tiktoken:o200k_base"),
        ("gpt-4o-mini-2024-07-18", "tiktoken:o200k_base"),
        ("openai/gpt-4.1", "tiktoken:o200k_base"),
        ("gpt-5-mini", "tiktoken:o200k_base"),
        ("o1", "tiktoken:o200k_base"),
        ("o3-mini", "tiktoken:o200k_base"),
        ("gpt-4", "tiktoken:cl100k_base"),
        ("gpt-4-turbo", "tiktoken:cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("gpt-oss-120b", "tiktoken:o200k_harmony"),
        ("meta-llama/Llama-3.1-8B-Instruct", "hf:llama3"),
        ("Meta-Llama-3-70B-Instruct-Q4_K_M.gguf", "hf:llama3"),
        ("llama3.2", "hf:llama3"),
        ("Qwen/Qwen2.5-7B-Instruct", "hf:qwen3"),
        ("mistralai/Mistral-Nemo-Instruct-2407", "hf:mistral-nemo"),
        ("mistral-small-24b-instruct-2501", "hf:mistral-tekken"),
        ("mistral-7b-instruct-v0.3", "hf:mistral-v3"),
        ("mixtral-8x7b", "hf:mistral-v3"),
        ("claude-sonnet-4", "heuristic"),
        ("llama-2-13b", "heuristic"),
        (None, "heuristic"),
    ],
)
def test_r2_6_model_name_picks_profile(model: str | None, spec: str) -> None:
    assert spec_for_model(model) == spec


def test_r2_6_auto_falls_back_to_heuristic_when_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evacore.errors import InvalidInput
    from evacore.tokenize import registry

    def missing(encoding: str, prefix: str = "tiktoken") -> None:
        raise InvalidInput("no vocab file (quicktok-v1 not installed)")

    monkeypatch.setattr(registry, "tiktoken_profile", missing)
    assert get_profile(None, model="gpt-4o").name == "heuristic"
    with pytest.raises(InvalidInput):
        get_profile("tiktoken:o200k_base")  # an explicit spec is not silently replaced
    assert get_profile(None, model="unknown-model").name == "heuristic"
    assert get_profile("", model=None).name == "heuristic"
