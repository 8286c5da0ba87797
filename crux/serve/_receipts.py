"""`/v1/receipts`: the content-free receipt and inspection of a request, within the tenant.

A receipt belongs to the generation that sent its request; another tenant's receipt
answers 404 exactly as an unknown request id does (one lookup either way).
"""

from __future__ import annotations

from fastapi import APIRouter

from crux.serve._deps import Scope, Services, Shared
from crux.serve._errors import ERROR_RESPONSES, NotFoundError
from crux.serve._tenancy import TenantScope
from planner import RequestInspection, RequestReceipt
from vocabulary.ids import check_wire_id

router = APIRouter(prefix="/v1/receipts", tags=["receipts"], responses=ERROR_RESPONSES)

MAX_REQUEST_ID_LENGTH = 256


async def _owned(scope: TenantScope, shared: Services, request_id: str) -> str:
    check_wire_id(request_id, "request id", limit=MAX_REQUEST_ID_LENGTH)
    found, key = await shared.generations.receipt_owner(request_id)
    if not found or not scope.owns_key(key):
        raise NotFoundError
    return request_id


@router.get("/{request_id}", summary="A request's receipt")
async def receipt(request_id: str, scope: Scope, shared: Shared) -> RequestReceipt:
    """What was sent: model, input tokens, adaptations, warnings (`receipt`)."""
    try:
        return await shared.runtime.receipt(await _owned(scope, shared, request_id))
    except KeyError:
        raise NotFoundError from None


@router.get("/{request_id}/inspection", summary="A request's full inspection")
async def inspection(request_id: str, scope: Scope, shared: Shared) -> RequestInspection:
    """Every candidate, rung and decision of the plan (`receipt.inspect()`)."""
    try:
        return await shared.runtime.inspect(await _owned(scope, shared, request_id))
    except KeyError:
        raise NotFoundError from None
