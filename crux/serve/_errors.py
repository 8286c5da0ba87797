"""Domain errors as HTTP responses: one table, content-free bodies.

A missing Thread, a deleted one and another tenant's answer with one and the same 404 body;
request validation failures name the fields and the kind of each defect, never the values
sent (FastAPI's default would echo them).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from crux.serve._models import ErrorBody, ErrorInfo
from telemetry.logs import get_logger
from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    GenerationFailedError,
    OperatorError,
    OutputValidationError,
    ProviderError,
    RequestCompositionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
    ThreadInUseError,
)

_log = get_logger(__name__)

NOT_FOUND = ErrorInfo(type="NotFound", code="not_found", message="no such resource")
"""The one body of every 404: what does not exist and what is not the caller's look alike."""

UNAUTHENTICATED = ErrorInfo(
    type="Unauthenticated",
    code="unauthenticated",
    message="a valid API key or bearer token is required (Authorization: Bearer ...)",
)

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (401, "No valid credential"),
        (404, "No such resource (or not the caller's)"),
        (409, "Conflicts with what is stored (identity_conflict, in use, redacted)"),
        (422, "Invalid request (the fields and the kind of each defect)"),
    )
}
"""The error responses every authenticated route documents."""


class NotFoundError(Exception):
    """Raised by a route for a resource that does not exist in the caller's scope."""


def error_response(
    status: int, info: ErrorInfo, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A JSON error response with `info`."""
    return JSONResponse(
        ErrorBody(error=info).model_dump(mode="json"), status_code=status, headers=headers
    )


def _status(error: CruxError) -> tuple[int, ErrorInfo]:
    name = type(error).__name__
    if isinstance(error, ThreadError) and error.code in ("not_found", "deleted"):
        return 404, NOT_FOUND
    if isinstance(error, OperatorError) and error.code == "not_found":
        return 404, NOT_FOUND
    if isinstance(error, StorageUnavailableError | ThreadCommitError) and not isinstance(
        error, ThreadInUseError
    ):
        code = getattr(error, "code", "unavailable")
        return 503, ErrorInfo(type=name, code=str(code), message=str(error), retryable=True)
    if isinstance(error, ThreadError):
        status = 422 if error.code in ("invalid_message", "invalid_group") else 409
        return status, ErrorInfo(type=name, code=error.code, message=str(error))
    if isinstance(error, ConfigurationError | RequestCompositionError | OutputValidationError):
        code = getattr(error, "code", "invalid_request")
        return 422, ErrorInfo(type=name, code=str(code), message=str(error))
    if isinstance(error, OperatorError):
        return 409, ErrorInfo(type=name, code=error.code, message=str(error))
    if isinstance(error, ProviderError):
        return 502, ErrorInfo(
            type=name, code="provider", message=str(error), retryable=error.retryable
        )
    if isinstance(error, GenerationFailedError):
        return 502, ErrorInfo(type=name, code=error.reason, message=str(error))
    return 500, ErrorInfo(type=name, code="failed", message=str(error))


def error_info(error: CruxError) -> tuple[int, ErrorInfo]:
    """The status and body of a domain error (also used inside event streams)."""
    return _status(error)


async def crux_error(_request: Request, error: Exception) -> JSONResponse:
    """The handler of every `CruxError` a route raises."""
    assert isinstance(error, CruxError)
    status, info = _status(error)
    if status >= 500:
        _log.warning("http.request.failed", error=type(error).__name__, status=status)
    return error_response(status, info)


async def not_found(_request: Request, _error: Exception) -> JSONResponse:
    """The handler of `NotFoundError`."""
    return error_response(404, NOT_FOUND)


async def invalid_request(_request: Request, error: Exception) -> JSONResponse:
    """The handler of request validation errors: field paths and defect kinds only."""
    assert isinstance(error, RequestValidationError)
    defects = sorted(
        {
            f"{'.'.join(str(part) for part in item.get('loc', ()))} ({item.get('type', 'invalid')})"
            for item in error.errors()
        }
    )
    shown = "; ".join(defects[:10]) + ("; ..." if len(defects) > 10 else "")
    return error_response(
        422, ErrorInfo(type="RequestValidationError", code="invalid_request", message=shown)
    )
