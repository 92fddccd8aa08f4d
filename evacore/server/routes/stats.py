"""`GET /v1/stats` (R6.11, R8.6; master only) and the Prometheus text at `metrics`.

Must not: compute figures itself (the rules service and the store do) or require a token for
the metrics scrape, which carries counters only, never content.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from evacore.server.auth import Master
from evacore.server.deps import CoreDep, SessionDep

router = APIRouter(tags=["stats"])
metrics_router = APIRouter(tags=["stats"])
"""The metrics endpoint alone, for mounting at the root (`GET /metrics`)."""


@router.get("/stats")
async def get_stats(_: Master, core: CoreDep, session: SessionDep) -> dict[str, Any]:
    """`rules`: every current rule and every rule with records (`rule`, `fired`, `retried`,
    `current`); `tours`: counts by status; `tokens`: prompt and completion totals of the stored
    answers; `plugins`: failure counters (when the plugin host is running)."""
    from evacore.services import rules as service

    return await service.stats(session, core.plugins)


async def metrics() -> Response:
    """Prometheus text exposition: tours (`evacore_tours_total{status, mode}`,
    `evacore_tours_active`, `evacore_stage_seconds{stage}`, `evacore_first_token_seconds`),
    `evacore_tokens_total{direction}`, `evacore_provider_errors_total{code}`,
    `evacore_stream_rule_fired_total{rule, scope, retry}`, `evacore_plugin_failures_total`,
    and the process metrics."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


router.add_api_route("/metrics", metrics, methods=["GET"])
metrics_router.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
