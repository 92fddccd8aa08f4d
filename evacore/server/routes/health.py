"""`GET /v1/health`: answers without a token; says whether the database answers.

Must not: reveal configuration or secrets.
"""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from evacore import __version__
from evacore.server.deps import CoreDep

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(core: CoreDep) -> dict[str, object]:
    try:
        async with core.session() as s:
            await s.execute(text("SELECT 1"))
        db = "ok"
    except Exception:  # noqa: BLE001 - health reports, never raises
        db = "unavailable"
    return {"status": "ok" if db == "ok" else "degraded", "database": db, "version": __version__}
