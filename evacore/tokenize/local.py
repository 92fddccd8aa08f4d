"""Exact local tokenizers: tiktoken encodings, HF `tokenizers` JSON, SentencePiece, tekken.

Must not: download anything; every file comes from a path or from an installed package.
Loads are cached per process (they take 0.2-2 s and tens of MB).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

from evacore.errors import InvalidInput
from evacore.tokenize._vocab import load_encoding_spec, mistral_file
from evacore.tokenize.profile import _SyncProfile


class TiktokenProfile(_SyncProfile):
    """A tiktoken BPE encoding built from a bundled vocab. Special tokens written in the
    text (e.g. `<|eot_id|>` in a rendered Llama 3 prompt) count as one token each."""

    exact = True

    def __init__(self, name: str, encoding: Any, *, normalize_nfc: bool = False) -> None:
        self.name = name
        self.encoding = encoding
        self._nfc = normalize_nfc

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self._nfc:
            text = unicodedata.normalize("NFC", text)
        return len(self.encoding.encode(text, allowed_special="all", disallowed_special=()))


@lru_cache(maxsize=8)
def tiktoken_profile(encoding: str, prefix: str = "tiktoken") -> TiktokenProfile:
    """`o200k_base`, `cl100k_base`, `o200k_harmony`, `llama3` or `qwen3`."""
    import tiktoken

    spec = load_encoding_spec(encoding)
    enc = tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=spec.mergeable_ranks,
        special_tokens=spec.special_tokens,
    )
    return TiktokenProfile(f"{prefix}:{encoding}", enc, normalize_nfc=spec.normalize_nfc)


class HFJsonProfile(_SyncProfile):
    """A Hugging Face `tokenizer.json`, counted without the added BOS/EOS tokens."""

    exact = True

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name = name
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=8)
def hf_json_profile(path: str) -> HFJsonProfile:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:  # the Rust loader raises plain Exception
        raise InvalidInput(f"not a tokenizers JSON file: {Path(path).name}: {exc}") from exc
    return HFJsonProfile(f"hf:{path}", tokenizer)


class SentencePieceProfile(_SyncProfile):
    """A SentencePiece `.model` file (Mistral v1/v3, Llama 2 …), without BOS/EOS."""

    exact = True

    def __init__(self, name: str, processor: Any) -> None:
        self.name = name
        self.processor = processor

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.processor.encode(text))


@lru_cache(maxsize=8)
def sentencepiece_profile(path: str, name: str) -> SentencePieceProfile:
    try:
        import sentencepiece
    except ImportError as exc:
        raise InvalidInput("SentencePiece tokenizers need the 'sentencepiece' package") from exc
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=path)
    except (OSError, RuntimeError) as exc:
        raise InvalidInput(f"not a SentencePiece model: {Path(path).name}") from exc
    return SentencePieceProfile(name, processor)


class TekkenProfile(_SyncProfile):
    """Mistral's tekken tokenizer (Nemo, Pixtral, Small 3 …) through `mistral-common`."""

    exact = True

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name = name
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.tokenizer.encode(text, bos=False, eos=False))


@lru_cache(maxsize=4)
def tekken_profile(path: str, name: str) -> TekkenProfile:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    return TekkenProfile(name, Tekkenizer.from_file(path))


# names accepted after `hf:` → (loader kind, file or encoding)
HF_NAMES: dict[str, tuple[str, str]] = {
    "llama3": ("tiktoken", "llama3"),
    "qwen3": ("tiktoken", "qwen3"),
    "qwen2.5": ("tiktoken", "qwen3"),
    "mistral-tekken": ("tekken", "tekken_240911.json"),
    "mistral-nemo": ("tekken", "tekken_240718.json"),
    "mistral-v1": ("sentencepiece", "tokenizer.model.v1"),
    "mistral-v2": ("sentencepiece", "mistral_instruct_tokenizer_240216.model.v2"),
    "mistral-v3": ("sentencepiece", "mistral_instruct_tokenizer_240323.model.v3"),
    "mistral-v7": ("sentencepiece", "mistral_instruct_tokenizer_241114.model.v7"),
}
HF_ALIASES = {"llama-3": "llama3", "qwen2": "qwen3", "mistral": "mistral-v3",
              "tekken": "mistral-tekken", "nemo": "mistral-nemo"}


def hf_profile(spec: str) -> _SyncProfile:
    """`hf:<name>` (a name above, from an installed package) or `hf:<path>` (a
    `tokenizer.json` or a SentencePiece `.model` file)."""
    key = HF_ALIASES.get(spec.lower(), spec.lower())
    if key in HF_NAMES:
        kind, target = HF_NAMES[key]
        if kind == "tiktoken":
            return tiktoken_profile(target, prefix="hf")
        path = mistral_file(target)
        if path is None:
            raise InvalidInput(f"hf:{key} needs the 'mistral-common' package (not installed)")
        if kind == "tekken":
            return tekken_profile(str(path), f"hf:{key}")
        return sentencepiece_profile(str(path), f"hf:{key}")
    path = Path(spec).expanduser()
    if not path.is_file():
        raise InvalidInput(f"unknown tokenizer hf:{spec} (not a known name or an existing file)")
    resolved = str(path.resolve())
    if path.suffix == ".json":
        return hf_json_profile(resolved)
    if path.suffix == ".model" or ".model." in path.name:
        return sentencepiece_profile(resolved, f"hf:{resolved}")
    raise InvalidInput(f"hf:{spec}: expected a tokenizer .json or a SentencePiece .model file")
