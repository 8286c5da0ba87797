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

from vocabulary.details import ErrorDetails, encode_details
from vocabulary.errors import (
    ConfigurationError,
    ContextOverflowError,
    ErrorType,
    PreparationError,
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
    """Decorate an activity so every exception leaves through `to_application_error`.

    A provider error is told which model the call was for (the activity input's `model`),
    so its message can name it.
    """

    @functools.wraps(method)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await method(*args, **kwargs)
        except Exception as error:
            if isinstance(error, ProviderError) and error.model is None:
                error.model = _model_of(args)
            mapped = to_application_error(error)
            if mapped is error:
                raise
            # Never chained: a driver's or handler's message may quote content, and the
            # cause chain is serialised into workflow history and logged.
            raise mapped from None

    return wrapper


def _model_of(args: tuple[object, ...]) -> str | None:
    for arg in args:
        model = getattr(arg, "model", None)
        if isinstance(model, str):
            return model
    return None


def to_application_error(error: BaseException) -> BaseException:
    """Translate a domain or driver error into what Temporal should see.

    Only what can succeed later is retried: storage outages (connection errors, server
    shutdown, contention) and retryable provider failures. Data PostgreSQL refuses, and
    every error nobody classified, fail at once: retrying them would repeat a paid provider
    call or a tool run for nothing. No message here quotes an exception's arguments.

    Returns:
        An `ApplicationError` (or the error itself when it already is one).
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
            str(error),
            encode_details(ErrorDetails(code=error.code)),
            type=ErrorType.THREAD_COMMIT,
            non_retryable=False,
        )
    if isinstance(error, ThreadError):
        return ApplicationError(
            str(error),
            encode_details(ErrorDetails(code=error.code)),
            type=ErrorType.THREAD,
            non_retryable=error.code not in _RETRYABLE_THREAD_CODES,
        )
    if isinstance(error, RequestCompositionError):
        return ApplicationError(
            str(error),
            encode_details(
                ErrorDetails(
                    code=error.code, request_id=error.request_id, diagnostics=error.diagnostics
                )
            ),
            type=ErrorType.REQUEST_COMPOSITION,
            non_retryable=True,
        )
    if isinstance(error, ConfigurationError):
        return ApplicationError(str(error), type=ErrorType.CONFIGURATION, non_retryable=True)
    if isinstance(error, PreparationError):
        # A hook is user code: one that raised would most likely raise again, so the
        # run fails at once (typed) instead of calling it over and over.
        return ApplicationError(
            str(error),
            encode_details(ErrorDetails(code=error.code)),
            type=ErrorType.PREPARATION,
            non_retryable=True,
        )
    if isinstance(error, UnicodeEncodeError | asyncpg.DataError):
        return ApplicationError(
            "invalid_message: a value PostgreSQL cannot store (a NUL byte, a lone surrogate"
            " or an out-of-range number)",
            encode_details(ErrorDetails(code="invalid_message")),
            type=ErrorType.THREAD,
            non_retryable=True,
        )
    if isinstance(error, asyncpg.UndefinedTableError | asyncpg.UndefinedColumnError):
        # Retried like an outage: a migration applied meanwhile (or a table restored) lets
        # the same statement succeed, and the workflow shows it is blocked.
        return ApplicationError(
            "storage unavailable: a table is missing; run `crux db migrate` (or start the"
            " worker with CRUX_MIGRATE=1)",
            type=ErrorType.STORAGE_UNAVAILABLE,
            non_retryable=False,
        )
    if _transient_storage(error):
        return ApplicationError(
            "storage unavailable", type=ErrorType.STORAGE_UNAVAILABLE, non_retryable=False
        )
    return ApplicationError(
        f"internal error ({type(error).__name__})", type=ErrorType.INTERNAL, non_retryable=True
    )


# SQLSTATE classes after which the same statement can succeed later: connection
# exceptions, insufficient resources, operator intervention (shutdown, restart) and system
# errors; plus serialisation failures, deadlocks and lock timeouts.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57", "58")
_TRANSIENT_SQLSTATES = ("40001", "40P01", "55P03")


def _transient_storage(error: BaseException) -> bool:
    # `InternalClientError` is a connection left in a broken protocol state (a worker killed
    # or a query cancelled mid-exchange): a retry takes another connection and succeeds.
    if isinstance(
        error,
        StorageUnavailableError
        | OSError
        | TimeoutError
        | asyncpg.InterfaceError
        | asyncpg.InternalClientError,
    ):
        return True
    if isinstance(error, asyncpg.PostgresError):
        state = str(getattr(error, "sqlstate", "") or "")
        return state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state in _TRANSIENT_SQLSTATES
    return False


def is_storage_unavailable(error: BaseException) -> bool:
    """Whether `error` (or what it was raised from) means PostgreSQL cannot be reached.

    Outages, server restarts and contention alike: the same statement can succeed later.
    The stores wrap driver errors (a publication with an unknown outcome becomes
    `ThreadCommitError`), so the explicit cause chain is followed too.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if _transient_storage(current):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def _provider_error(error: ProviderError) -> ApplicationError:
    if isinstance(error, ContextOverflowError):
        error_type = ErrorType.CONTEXT_TOO_LONG
    else:
        known = {member.value: member for member in ErrorType}
        error_type = next(
            (known[kind.__name__] for kind in type(error).__mro__ if kind.__name__ in known),
            ErrorType.PROVIDER,
        )
    delay: timedelta | None = None
    if (
        isinstance(error, ProviderHTTPError)
        and error.retry_after is not None
        and error.retry_after >= 0
    ):
        delay = timedelta(seconds=error.retry_after)
    # `explain()` names the remedy and never the provider's body text.
    return ApplicationError(
        error.explain(),
        encode_details(
            ErrorDetails(
                # The provider's error type (`rate_limit_error`, `overloaded_error`, ...) is
                # an identifier the classifier vetted, never its message text.
                code=error.error_type if isinstance(error, ProviderHTTPError) else None,
                provider=error.provider,
                status=error.status,
                host=error.host,
                model=error.model,
            )
        ),
        type=error_type,
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )
