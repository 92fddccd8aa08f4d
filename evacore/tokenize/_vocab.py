"""Find and load vocab files shipped by installed packages; never download anything.

Must not: fetch over the network, or accept a vocab whose content hash differs from the
published one (a wrong vocab would give silently wrong counts).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evacore.errors import InvalidInput

# sha256 of the vocab written in tiktoken's text format (base64 token, space, rank, newline):
# cl100k/o200k are the hashes tiktoken itself pins for OpenAI's files, llama3 is the hash
# of Meta's `tokenizer.model`; qwen3 pins the file quicktok-v1 0.4.0 ships.
_PINNED_SHA256 = {
    "llama3": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    "qwen3": "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
}

# pre-tokenizer patterns of the open-model encodings (from their published tokenizer configs)
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# sha256 of the data files of quicktok-v1 0.4.0, whose ranks hash to the pins above (the
# tests re-derive that). A matching file skips the slower ranks hash; any other file must
# pass it.
_FILE_SHA256 = {
    "cl100k_base": "4a945d497c213acde921bc8d69bc8dad9c603ea97c50c014e04ad0fadc09eecb",
    "o200k_base": "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe",
    "llama3": "124bfc185ea93e669e4ce2e1b5aa5733d2e793a910372fa198dfc1597e1220f2",
    "qwen3": "6114087889f61af31f72abe80529bbd09826df4d396753a281a14bcc21abc2fa",
}

_QUICKTOK_FILES = {"cl100k_base": "cl100k", "o200k_base": "o200k", "llama3": "llama3",
                   "qwen3": "qwen3"}
_PATCH_LOCK = threading.Lock()


@dataclass(frozen=True)
class EncodingSpec:
    """Everything `tiktoken.Encoding` needs."""

    name: str
    pat_str: str
    mergeable_ranks: dict[bytes, int]
    special_tokens: dict[str, int]
    normalize_nfc: bool = False


def package_dir(package: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def quicktok_data() -> Path | None:
    root = package_dir("quicktok")
    return root / "data" if root is not None and (root / "data").is_dir() else None


def _read_quicktok_vocab(path: Path, data: bytes | None = None) -> dict[bytes, int]:
    """quicktok's `.vocab`: u32 count, then per token u16 length, bytes, u32 rank."""
    data = path.read_bytes() if data is None else data
    (count,) = struct.unpack_from("<I", data, 0)
    offset, ranks = 4, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        offset += 2
        token = data[offset : offset + length]
        offset += length
        (rank,) = struct.unpack_from("<I", data, offset)
        offset += 4
        ranks[token] = rank
    if offset != len(data):
        raise InvalidInput(f"malformed vocab file {path.name}")
    return ranks


def _read_quicktok_special(path: Path) -> dict[str, int]:
    """quicktok's `.special`: u32 count, then per token u32 id, u16 length, bytes."""
    data = path.read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    offset, special = 4, {}
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", data, offset)
        offset += 6
        special[data[offset : offset + length].decode("utf-8")] = token_id
        offset += length
    return special


def ranks_sha256(ranks: dict[bytes, int]) -> str:
    """sha256 of the ranks in tiktoken's `.tiktoken` text format."""
    digest = hashlib.sha256()
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        digest.update(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    return digest.hexdigest()


def _shipped_ranks(encoding: str) -> tuple[dict[bytes, int], Path, bool]:
    """Ranks, the data folder, and whether the file is byte-identical to a pinned one."""
    data = quicktok_data()
    if data is None:
        raise InvalidInput(
            f"no vocab file for {encoding!r}: install the 'quicktok-v1' package, "
            "which ships it (nothing is downloaded at run time)"
        )
    path = data / f"{_QUICKTOK_FILES[encoding]}.vocab"
    raw = path.read_bytes()
    known = hashlib.sha256(raw).hexdigest() == _FILE_SHA256[encoding]
    return _read_quicktok_vocab(path, raw), data, known


def _openai_params(encoding: str) -> dict[str, Any]:
    """tiktoken's own definition of an OpenAI encoding (pattern, specials, pinned hash),
    with its download replaced by a capture, so the ranks can come from a local file."""
    from tiktoken_ext import openai_public

    captured: dict[str, Any] = {}

    def capture(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        captured["hash"] = expected_hash
        return {}

    with _PATCH_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = capture  # type: ignore[assignment]
        try:
            params = dict(openai_public.ENCODING_CONSTRUCTORS[encoding]())
        finally:
            openai_public.load_tiktoken_bpe = original  # type: ignore[assignment]
    params["expected_hash"] = captured.get("hash")
    return params


OPENAI_ENCODINGS = {"cl100k_base": "cl100k_base", "o200k_base": "o200k_base",
                    "o200k_harmony": "o200k_base"}
"""Encodings we can build locally → the shipped vocab they use."""


def load_encoding_spec(name: str) -> EncodingSpec:
    """The spec of a bundled encoding: OpenAI's (tiktoken names) or `llama3`/`qwen3`."""
    if name in OPENAI_ENCODINGS:
        ranks, _, known = _shipped_ranks(OPENAI_ENCODINGS[name])
        params = _openai_params(name)
        expected = params["expected_hash"]
        if not known and expected and ranks_sha256(ranks) != expected:
            raise InvalidInput(f"the shipped {name} vocab does not match tiktoken's pinned hash")
        return EncodingSpec(name, params["pat_str"], ranks, dict(params["special_tokens"]))
    if name in ("llama3", "qwen3"):
        ranks, data, known = _shipped_ranks(name)
        if not known and ranks_sha256(ranks) != _PINNED_SHA256[name]:
            raise InvalidInput(f"the shipped {name} vocab does not match its pinned hash")
        special = _read_quicktok_special(data / f"{name}.special")
        pattern = LLAMA3_PATTERN if name == "llama3" else QWEN_PATTERN
        return EncodingSpec(name, pattern, ranks, special, normalize_nfc=name == "qwen3")
    raise InvalidInput(f"unknown encoding {name!r}")


def mistral_file(name: str) -> Path | None:
    """A tokenizer file shipped by `mistral-common`, if that package is installed."""
    root = package_dir("mistral_common")
    if root is None:
        return None
    path = root / "data" / name
    return path if path.is_file() else None
