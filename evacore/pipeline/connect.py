"""Provider instances for tours: one shared HTTP client per core, one adapter per connection.

Must not: build requests or parse responses (adapters do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from evacore.providers._pools import SpreadTransport
from evacore.providers._stream_client import StreamClient
from evacore.providers.base import Connection, Provider, Timeouts, make_provider

if TYPE_CHECKING:
    from evacore.core import Core


class ProviderPool:
    """Adapters keyed by the connection's settings; rebuilt when a connection changes."""

    def __init__(self) -> None:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0),
            transport=SpreadTransport(
                limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100)),
            follow_redirects=False,
        )
        self.streams = StreamClient()
        self._providers: dict[tuple[Any, ...], Provider] = {}

    def get(self, snapshot: dict[str, Any]) -> Provider:
        params = snapshot.get("params") or {}
        key = (
            snapshot["id"], snapshot["kind"], snapshot.get("base_url"), snapshot.get("api_key"),
            snapshot.get("model"), snapshot.get("max_tokens"), repr(sorted(params.items())),
        )
        provider = self._providers.get(key)
        if provider is None:
            provider = make_provider(to_connection(snapshot), client=self.client,
                                     streams=self.streams)
            self._providers = {k: v for k, v in self._providers.items() if k[0] != key[0]}
            self._providers[key] = provider
        return provider

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        await self.client.aclose()
        await self.streams.aclose()


def to_connection(snapshot: dict[str, Any]) -> Connection:
    params = dict(snapshot.get("params") or {})
    t = params.pop("timeouts", None) or {}
    timeouts = Timeouts(**{k: float(v) for k, v in t.items() if k in Timeouts.__dataclass_fields__})
    return Connection(
        id=snapshot["id"],
        name=snapshot["name"],
        kind=snapshot["kind"],
        base_url=snapshot.get("base_url") or "",
        api_key=snapshot.get("api_key"),
        model=snapshot.get("model") or "",
        context_size=int(snapshot.get("context_size") or 8192),
        max_tokens=int(snapshot.get("max_tokens") or 512),
        vision=bool(snapshot.get("vision")),
        prefill=snapshot.get("prefill") or "",
        params=params,
        timeouts=timeouts,
        retries=int(params.pop("retries", 2)),
        retry_backoff=float(params.pop("retry_backoff", 0.5)),
        retry_after_cap=float(params.pop("retry_after_cap", 20.0)),
    )


def provider_for(core: Core, snapshot: dict[str, Any]) -> Provider:
    return core.providers.get(snapshot)
