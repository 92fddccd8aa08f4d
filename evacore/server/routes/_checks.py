"""Input checks shared by several routers.

Must not: touch storage.
"""

from __future__ import annotations

from evacore.errors import InvalidInput

TOKENIZER_PREFIXES = ("tiktoken:", "hf:")
TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base", "o200k_harmony")


def check_tokenizer(spec: str) -> None:
    """`heuristic`, `remote`, `tiktoken:<encoding>` or `hf:<name or path>` (§13)."""
    if spec in ("heuristic", "remote"):
        return
    if spec.startswith("tiktoken:"):
        if spec.split(":", 1)[1] in TIKTOKEN_ENCODINGS:
            return
        raise InvalidInput(f"unknown tiktoken encoding in {spec!r}; known: "
                           + ", ".join(TIKTOKEN_ENCODINGS))
    if spec.startswith(TOKENIZER_PREFIXES) and len(spec.split(":", 1)[1]) > 0:
        return
    raise InvalidInput(
        "tokenizer must be 'heuristic', 'remote', 'tiktoken:<encoding>' or 'hf:<name or path>'"
    )
