"""R2.6: local tokenizer profiles count exactly like their reference implementations."""

from __future__ import annotations

import shutil
import unicodedata
from pathlib import Path

import pytest
import regex

from evacore.errors import InvalidInput
from evacore.tokenize import _vocab, get_profile
from evacore.tokenize._vocab import load_encoding_spec
from evacore.tokenize.local import TiktokenProfile

from .conftest import CORPUS

SPECIALS = "<|endoftext|> and <|eot_id|>"


def _reference_bpe_count(text: str, profile: TiktokenProfile) -> int:
    """Textbook byte-level BPE (regex pre-split, then always merge the lowest-ranked pair),
    written independently of tiktoken's Rust core, over the profile's verified vocab."""
    if profile.name == "hf:qwen3":
        text = unicodedata.normalize("NFC", text)
    ranks = profile.encoding._mergeable_ranks
    total = 0
    for piece in regex.findall(profile.encoding._pat_str, text):
        data = piece.encode("utf-8")
        if data in ranks:
            total += 1
            continue
        parts = [bytes([b]) for b in data]
        while len(parts) > 1:
            best: tuple[int, int] | None = None
            for i in range(len(parts) - 1):
                rank = ranks.get(parts[i] + parts[i + 1])
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        total += len(parts)
    return total


@pytest.mark.parametrize(
    ("spec", "encoding"),
    [("tiktoken:o200k_base", "o200k_base"), ("tiktoken:cl100k_base", "cl100k_base"),
     ("hf:llama3", "llama3"), ("hf:qwen3", "qwen3")],
)
def test_r2_6_bundled_bpe_counts_match_reference(spec: str, encoding: str) -> None:
    profile = get_profile(spec)
    assert isinstance(profile, TiktokenProfile)
    assert profile.exact and profile.name == spec
    for name, text in CORPUS.items():
        assert profile.count(text) == _reference_bpe_count(text, profile), name
    # the vocab is byte-identical to the file tiktoken pins (OpenAI), to Meta's
    # tokenizer.model (llama3), or to the file we pinned (qwen3)
    if encoding in ("o200k_base", "cl100k_base"):
        pinned = _vocab._openai_params(encoding)["expected_hash"]
    else:
        pinned = _vocab._PINNED_SHA256[encoding]
    assert _vocab.ranks_sha256(profile.encoding._mergeable_ranks) == pinned


@pytest.mark.parametrize("encoding", ["cl100k_base"])
def test_r2_6_openai_counts_match_quicktok(encoding: str) -> None:
    quicktok = pytest.importorskip("quicktok")
    profile = get_profile(f"tiktoken:{encoding}")
    reference = quicktok.get_encoding(encoding)
    for name, text in CORPUS.items():
        assert profile.count(text) == len(reference.encode(text)), name


def test_r2_6_known_counts_of_a_fixed_sentence() -> None:
    # values published for tiktoken's encodings; a wrong vocab or pattern changes them
    text = "hello world"
    assert get_profile("tiktoken:cl100k_base").count(text) == 2
    assert get_profile("tiktoken:o200k_base").count(text) == 2
    assert get_profile("tiktoken:cl100k_base").count("") == 0


def test_r2_6_special_tokens_in_text_count_as_one() -> None:
    llama = get_profile("hf:llama3")
    assert llama.count("<|eot_id|>") == 1
    assert get_profile("tiktoken:o200k_base").count("<|endoftext|>") == 1
    assert llama.count(SPECIALS) < len(SPECIALS) / 2


def test_r2_6_tampered_vocab_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _vocab.quicktok_data()
    assert source is not None
    data = bytearray((source / "cl100k.vocab").read_bytes())
    data[-1] ^= 0x01  # change the last token's rank
    (tmp_path / "cl100k.vocab").write_bytes(bytes(data))
    monkeypatch.setattr(_vocab, "quicktok_data", lambda: tmp_path)
    with pytest.raises(InvalidInput, match="pinned hash"):
        load_encoding_spec("cl100k_base")


def test_r2_6_missing_vocab_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_vocab, "quicktok_data", lambda: None)
    with pytest.raises(InvalidInput, match="quicktok-v1"):
        load_encoding_spec("llama3")


def test_r2_6_hf_tokenizer_json_path(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "<s>"])
    tokenizer.train_from_iterator(CORPUS.values(), trainer)
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    profile = get_profile(f"hf:{path}")
    assert profile.exact and profile.name == f"hf:{path.resolve()}"
    for text in CORPUS.values():
        expected = len(tokenizer.encode(text, add_special_tokens=False).ids)
        assert profile.count(text) == expected


def test_r2_6_sentencepiece_model_path(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    source = _vocab.mistral_file("tokenizer.model.v1")
    if source is None:
        pytest.skip("mistral-common not installed")
    path = tmp_path / "custom.model"
    shutil.copy(source, path)
    profile = get_profile(f"hf:{path}")
    processor = spm.SentencePieceProcessor(model_file=str(source))
    for text in CORPUS.values():
        assert profile.count(text) == len(processor.encode(text))


def test_r2_6_mistral_tekken_counts() -> None:
    """Counts measured with mistral-common's own `Tekkenizer` (tekken_240911.json)."""
    pytest.importorskip("mistral_common")
    profile = get_profile("hf:mistral-tekken")
    counts = {name: profile.count(text) for name, text in CORPUS.items()}
    assert counts == {"chinese": 729, "code": 543, "english": 550, "russian": 760}


def test_r2_6_bad_specs_are_invalid_input(tmp_path: Path) -> None:
    for spec in ("tiktoken:p99k", "hf:no-such-tokenizer", "bogus", "hf:"):
        with pytest.raises(InvalidInput):
            get_profile(spec)
    junk = tmp_path / "junk.json"
    junk.write_text("{}")
    with pytest.raises(InvalidInput):
        get_profile(f"hf:{junk}")
    with pytest.raises(InvalidInput, match="base_url"):
        get_profile("remote")
