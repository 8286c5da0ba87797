"""`/healthz` (the process answers) and `/readyz` (PostgreSQL and Temporal answer)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from crux.serve._deps import Shared
from crux.serve._models import Health

router = APIRouter(tags=["health"])

READY_TIMEOUT_SECONDS = 5.0
"""How long readiness waits for each dependency."""


@router.get("/healthz", summary="Liveness")
async def healthz() -> Health:
    """The process serves requests (no dependency is asked)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness",
    response_model=Health,
    responses={503: {"model": Health, "description": "A dependency does not answer"}},
)
async def readyz(shared: Shared) -> JSONResponse:
    """PostgreSQL and Temporal both answer: route traffic here."""
    failed: list[str] = []
    try:
        await asyncio.wait_for(shared.runtime.pool.fetchval("SELECT 1"), READY_TIMEOUT_SECONDS)
    except Exception:  # any failure means not ready; which one is not content to report
        failed.append("postgresql")
    try:
        await asyncio.wait_for(
            shared.runtime.client.service_client.check_health(), READY_TIMEOUT_SECONDS
        )
    except Exception:  # as above
        failed.append("temporal")
    health = Health(status="unavailable" if failed else "ready", failed=failed)
    return JSONResponse(health.model_dump(mode="json"), status_code=503 if failed else 200)
