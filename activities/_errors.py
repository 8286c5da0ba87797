"""The one place where domain errors become Temporal `ApplicationError`s.

`ApplicationError.type` is always the domain class name (`crux.errors.ErrorType`), and the
first detail is the error code where the class has one, so workflows and the facade can
rebuild a typed error without parsing messages. Nothing here carries content.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import ParamSpec, TypeVar

import asyncpg
from temporalio.exceptions import ApplicationError

from crux.errors import (
    ConfigurationError,
    ContextOverflowError,
    ErrorType,
    ProviderError,
    ProviderHTTPError,
    RequestCompositionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)

# Contention and unknown outcomes are worth retrying: a repeat of the same call repairs.
_RETRYABLE_THREAD_CODES = frozenset({"commit_failed"})


_P = ParamSpec("_P")
_R = TypeVar("_R")


def maps_errors(method: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
    """Decorate an activity so every exception leaves through `to_application_error`."""

    @functools.wraps(method)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await method(*args, **kwargs)
        except Exception as error:
            mapped = to_application_error(error)
            if mapped is error:
                # Unknown errors go to Temporal as they are (and are retried); chaining an
                # error to itself would make its cause chain endless.
                raise
            raise mapped from error

    return wrapper


def to_application_error(error: BaseException) -> BaseException:
    """Translate a domain or driver error into what Temporal should see.

    Returns:
        An `ApplicationError` for known errors; the original error otherwise (Temporal
        then retries it under the activity's policy).
    """
    if isinstance(error, ApplicationError):
        return error
    if isinstance(error, ProviderError):
        return _provider_error(error)
    if is_storage_unavailable(error):
        # Typed apart from everything else: activity retry policies leave it to the
        # workflow, which waits the outage out in a visible `storage_blocked` stage
        # instead of spending attempts meant for provider failures.
        return ApplicationError(
            "storage unavailable", type=ErrorType.STORAGE_UNAVAILABLE, non_retryable=False
        )
    if isinstance(error, ThreadCommitError):
        return ApplicationError(
            str(error), error.code, type=ErrorType.THREAD_COMMIT, non_retryable=False
        )
    if isinstance(error, ThreadError):
        return ApplicationError(
            str(error),
            error.code,
            type=ErrorType.THREAD,
            non_retryable=error.code not in _RETRYABLE_THREAD_CODES,
        )
    if isinstance(error, RequestCompositionError):
        return ApplicationError(
            str(error),
            error.code,
            error.diagnostics,
            type=ErrorType.REQUEST_COMPOSITION,
            non_retryable=True,
        )
    if isinstance(error, ConfigurationError):
        return ApplicationError(str(error), type=ErrorType.CONFIGURATION, non_retryable=True)
    return error


# What PostgreSQL going away looks like from asyncpg: refused or reset sockets, a missing
# Unix socket, a server shutting down or still starting, a pool that cannot connect.
_UNAVAILABLE = (
    StorageUnavailableError,
    OSError,  # includes ConnectionError, TimeoutError and a missing socket file
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
)


def is_storage_unavailable(error: BaseException) -> bool:
    """Whether `error` (or what it was raised from) means PostgreSQL cannot be reached.

    The stores wrap driver errors (a publication with an unknown outcome becomes
    `ThreadCommitError`), so the explicit cause chain is followed too.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, _UNAVAILABLE):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def _provider_error(error: ProviderError) -> ApplicationError:
    if isinstance(error, ContextOverflowError):
        error_type = ErrorType.CONTEXT_TOO_LONG
    else:
        known = {member.value: member for member in ErrorType}
        error_type = known.get(type(error).__name__, ErrorType.PROVIDER)
    details: list[object] = [error.provider]
    delay: timedelta | None = None
    if isinstance(error, ProviderHTTPError):
        details.append(error.status_code)
        if error.retry_after is not None and error.retry_after >= 0:
            delay = timedelta(seconds=error.retry_after)
    return ApplicationError(
        str(error),
        *details,
        type=error_type,
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )
