"""Stage 11, request: open the provider stream for this step with the tour's abort signal.

Must not: retry after the first token or parse events (adapters and stage 12 do). The
request is recorded in diagnostics with secrets redacted (R2.15).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evacore.pipeline.connect import provider_for
from evacore.providers.base import TextTap

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour


class Request:
    number = 11
    name = "request"

    async def run(self, core: Core, tour: Tour) -> None:
        provider = provider_for(core, tour.data["connection"])
        request = tour.data["request"]
        wire = None
        try:
            wire = provider.wire_request(request, stream=True)
            tour.diagnostics.setdefault("requests", []).append(
                {"step": len(tour.steps), "method": wire.method, "url": wire.url,
                 "headers": wire.headers, "body": wire.body}
            )
        except Exception:  # noqa: BLE001 - diagnostics never break a tour
            tour.diagnostics.setdefault("requests", []).append(
                {"step": len(tour.steps), "body": {"messages": request.messages,
                                                  "prompt": request.prompt}}
            )
        if getattr(provider, "fast_text", None) is not None:
            tap = tour.data["tap"] = TextTap()  # the streaming stage opens it (fast lane)
            tour.data["events_iter"] = provider.stream(request, wire=wire, tap=tap)
        else:
            tour.data.pop("tap", None)
            tour.data["events_iter"] = provider.stream(request, wire=wire)
