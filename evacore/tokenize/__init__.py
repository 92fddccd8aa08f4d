"""Token counting (R2.6): tokenizer profiles, the per-(profile, text) count cache and the
chat-format overhead of a message list.

Must not: import the pipeline, or download vocab files at run time.
"""

from evacore.tokenize.cache import CountCache, cached_count, cached_count_async, text_digest
from evacore.tokenize.messages import count_messages
from evacore.tokenize.profile import HeuristicProfile, TokenizerProfile, heuristic_estimate
from evacore.tokenize.registry import available_local, get_profile, spec_for_model
from evacore.tokenize.remote import RemoteProfile

__all__ = [
    "CountCache",
    "HeuristicProfile",
    "RemoteProfile",
    "TokenizerProfile",
    "available_local",
    "cached_count",
    "cached_count_async",
    "count_messages",
    "get_profile",
    "heuristic_estimate",
    "spec_for_model",
    "text_digest",
]
