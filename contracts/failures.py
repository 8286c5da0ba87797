"""The Temporal half of the failure registry: domain errors to `ApplicationError` and back.

`vocabulary.failures` declares each family; this module applies the declarations, so an
activity, a workflow, the facade and a parallel parent all encode and decode a failure the
same way. The `ApplicationError` carries the family's type, message, retry flag (and
`next_retry_delay` when the error asks for one) and exactly one detail: the encoded
`ErrorDetails`, a plain JSON object.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, TypeVar

from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    FailureError,
    TerminatedError,
    TimeoutError,
)

from vocabulary.details import ErrorDetails, decode_details, encode_details
from vocabulary.errors import CruxError, GenerationFailedError
from vocabulary.failures import family_of, rebuild

_A = TypeVar("_A", bound=ApplicationError)

EndedKind = Literal["cancelled", "terminated", "timed_out"]
"""How a run ended without a typed failure."""

ENDED_MESSAGES: dict[EndedKind, str] = {
    "cancelled": "the generation was cancelled",
    "terminated": "the generation was terminated",
    "timed_out": "the generation timed out",
}


def internal_error(error: BaseException) -> GenerationFailedError:
    """The failure of an error nobody classified, naming only its class (never its text)."""
    return GenerationFailedError("internal", f"internal error ({type(error).__name__})")


def application_error(error: CruxError, *, kind: type[_A] = ApplicationError) -> _A:
    """The `ApplicationError` that carries `error` across Temporal.

    Args:
        error: The domain error. One of no declared family (a bare `CruxError`) travels as
            `InternalError`, naming only its class.
        kind: `ApplicationError` or a subclass the raising workflow tells apart.
    """
    family = family_of(error)
    if family is None:
        error = internal_error(error)
        family = family_of(error)
        assert family is not None  # `GenerationFailedError` is declared
    delay = family.retry_delay(error)
    return kind(
        family.message(error),
        encode_details(family.details(error)),
        type=family.type,
        non_retryable=not family.retryable(error),
        next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
    )


def rebuilt(failure: ApplicationError) -> CruxError | None:
    """The typed domain error `failure` carries, `None` when its type is not declared."""
    return rebuild(
        failure.type,
        failure.message,
        decode_details(failure.details, failure.type),
        retryable=not failure.non_retryable,
    )


def rebuilt_from(
    error_type: str | None, message: str, details: ErrorDetails, *, non_retryable: bool
) -> CruxError:
    """The typed error of a recorded failure; an undeclared type becomes `internal`."""
    error = rebuild(error_type, message, details, retryable=not non_retryable)
    return error or GenerationFailedError("internal", "the generation failed")


def typed_cause(error: BaseException) -> ApplicationError | EndedKind | None:
    """The first typed `ApplicationError` in `error`'s cause chain, or how the run ended.

    `cancelled`, `terminated` or `timed_out` when the chain reaches such an end first;
    `None` when it holds neither.
    """
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ApplicationError) and cause.type:
            return cause
        if isinstance(cause, CancelledError):
            return "cancelled"
        if isinstance(cause, TerminatedError):
            return "terminated"
        if isinstance(cause, TimeoutError):
            return "timed_out"
        cause = cause.cause if isinstance(cause, FailureError) else cause.__cause__
    return None


def domain_error(failure: BaseException) -> CruxError:
    """The typed domain error of a failed run (a `WorkflowFailureError`, say).

    Always a `CruxError`: a failure nobody classified becomes `GenerationFailedError`.
    """
    cause = typed_cause(failure)
    if isinstance(cause, ApplicationError):
        error = rebuilt(cause)
        if error is not None:
            return error
    elif cause is not None:
        return GenerationFailedError(cause, ENDED_MESSAGES[cause])
    return GenerationFailedError("internal", "the generation failed")


__all__ = [
    "ENDED_MESSAGES",
    "EndedKind",
    "application_error",
    "domain_error",
    "internal_error",
    "rebuilt",
    "rebuilt_from",
    "typed_cause",
]
