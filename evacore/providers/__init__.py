"""Provider adapters (stages 10-11): one module per connection kind, behind one Protocol.

Must not: leak vendor formats; outside this package code sees only the names below.
"""

from evacore.providers._sending import make_http_client
from evacore.providers.base import (
    CONNECTION_KINDS,
    Answer,
    Connection,
    Finish,
    Provider,
    ProviderEvent,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    Timeouts,
    ToolCall,
    Usage,
    WireRequest,
    collect,
    heuristic_tokens,
    make_provider,
)

__all__ = [
    "CONNECTION_KINDS",
    "Answer",
    "Connection",
    "Finish",
    "Provider",
    "ProviderEvent",
    "ProviderRequest",
    "ReasoningDelta",
    "TextDelta",
    "Timeouts",
    "ToolCall",
    "Usage",
    "WireRequest",
    "collect",
    "heuristic_tokens",
    "make_http_client",
    "make_provider",
]
