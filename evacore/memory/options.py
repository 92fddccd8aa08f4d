"""Retrieval options: defaults, overridden by the instance setting `retrieval`, then by a
chat's `settings.retrieval`; one validated model for all three layers.

Must not: read the database (callers pass the stored layers in).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evacore.errors import InvalidInput

INSTANCE_KEY = "retrieval"
"""Key of the instance-wide overrides in the settings table."""


class RetrievalOptions(BaseModel):
    """Every retrieval knob, with its default (documented in docs/memory.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Retrieval on or off for the chat (memory blocks are always inserted)."""
    messages: bool = True
    """Search the chat's own messages that are out of the context window."""
    documents: bool = True
    """Search data-bank documents (global, the chat's and its character's)."""
    query_messages: int = Field(2, ge=1, le=20)
    """The query is built from this many last messages (the newest weighs most)."""
    query_decay: float = Field(0.25, ge=0.0, le=1.0)
    """Weight of each older query message relative to the next newer one."""
    top_k: int = Field(5, ge=0, le=50)
    """At most this many results are inserted."""
    candidates: int = Field(50, ge=1, le=500)
    """Candidates fetched from each index (lexical, vector) before scoring."""
    min_score: float = Field(0.2, ge=0.0, le=1.0)
    """Results scoring below this are not inserted."""
    budget_share: float = Field(0.1, ge=0.0, le=0.5)
    """Share of the prompt budget (context − answer) results may use."""
    max_tokens: int | None = Field(None, ge=0)
    """A fixed token cap for results instead of `budget_share`."""
    half_life_turns: float = Field(200.0, gt=0)
    """Recency: a message this many turns old has lost half of the decaying part."""
    recency_weight: float = Field(0.3, ge=0.0, le=1.0)
    """Recency: the share of the score that decays (0 = no decay)."""
    vector_weight: float = Field(0.5, ge=0.0, le=1.0)
    """Hybrid: weight of the cosine similarity; the lexical score gets the rest."""
    prefix_match: bool = True
    """Words of 5+ letters also match longer forms (sister → sisters)."""
    depth: int = Field(1, ge=0, le=100)
    """Results are inserted this many history messages from the end (1 = before the input)."""
    role: str = Field("system", pattern="^(system|user|assistant)$")
    message_template: str = Field("[Earlier in this chat, {name} wrote: {text}]",
                                  max_length=2000)
    document_template: str = Field("[From the document \"{name}\": {text}]", max_length=2000)
    chunk_chars: int = Field(1200, ge=200, le=20000)
    """Documents and long messages are cut into chunks of at most this many characters."""
    chunk_overlap: int = Field(200, ge=0, le=5000)
    backfill_limit: int = Field(2000, ge=0, le=100000)
    """Messages of an imported chat indexed per tour until the whole chat is indexed."""


def merge(*layers: dict[str, Any] | None) -> RetrievalOptions:
    """Defaults overridden by each layer in turn; an invalid layer raises InvalidInput."""
    data: dict[str, Any] = {}
    for layer in layers:
        if layer:
            data.update(layer)
    try:
        return RetrievalOptions.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "retrieval"
        raise InvalidInput(f"retrieval setting {where}: {first.get('msg')}") from None


def merge_lenient(instance: dict[str, Any] | None, chat: Any) -> tuple[RetrievalOptions, str | None]:
    """Like `merge`, but a broken chat layer is ignored (the chat route stores it unchecked);
    returns the options and a warning for diagnostics."""
    base = merge(instance)
    if not chat:
        return base, None
    if not isinstance(chat, dict):
        return base, "chat settings.retrieval is not an object; ignored"
    try:
        return merge(instance, chat), None
    except InvalidInput as exc:
        return base, f"{exc.message}; the chat's retrieval settings were ignored"
