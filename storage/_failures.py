"""Driver errors become domain errors here, by asyncpg's own exception classes.

asyncpg raises one class per SQLSTATE, grouped by SQLSTATE class, so the classes say what a
retry can do (no SQLSTATE string is read anywhere):

- the same statement can succeed later (`StorageUnavailableError`, the driver's error as
  `__cause__`): connection exceptions (class 08, `PostgresConnectionError`), insufficient
  resources (53), operator intervention (57: shutdown, restart, cancelled statement), system
  errors (58), contention (`SerializationError`, `DeadlockDetectedError`,
  `LockNotAvailableError`), a connection left in a broken protocol state
  (`InterfaceError`, `InternalClientError`) and socket failures and timeouts;
- the schema is not there yet (`UndefinedTableError`, `UndefinedColumnError`): also retried
  like an outage, since a migration applied meanwhile lets the same statement succeed;
- a value PostgreSQL can never store (`DataError`, class 22, and text the driver cannot
  encode): `ThreadError('invalid_message')`, never retried, its cause dropped because the
  driver's message may quote the value.

Everything else is left as it is and fails the activity as `InternalError`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncContextDecorator
from types import TracebackType

from asyncpg import exceptions as pg

from vocabulary.errors import CruxError, StorageUnavailableError, ThreadError

UNREACHABLE: tuple[type[BaseException], ...] = (
    pg.PostgresConnectionError,
    pg.InsufficientResourcesError,
    pg.OperatorInterventionError,
    pg.PostgresSystemError,
    pg.InterfaceError,
    pg.InternalClientError,
    OSError,
    TimeoutError,
)
"""Failures after which the server may or may not have committed."""

CONTENDED: tuple[type[BaseException], ...] = (
    pg.SerializationError,
    pg.DeadlockDetectedError,
    pg.LockNotAvailableError,
)
"""Contention: the transaction rolled back and the same one can succeed later."""

TRANSIENT = UNREACHABLE + CONTENDED
"""Everything after which the same statement can succeed later."""

UNMIGRATED: tuple[type[BaseException], ...] = (pg.UndefinedTableError, pg.UndefinedColumnError)
"""The storage migrations have not been applied (or not all of them)."""

UNSTORABLE: tuple[type[BaseException], ...] = (pg.DataError, UnicodeEncodeError)
"""Values the server can never accept (NUL bytes, lone surrogates, out-of-range numbers)."""

MIGRATE_REMEDY = "run `crux db migrate` (or start the worker with CRUX_MIGRATE=1)"


def unstorable(thread_id: str | None = None) -> ThreadError:
    """`invalid_message`: repeating the call cannot help. Content-free."""
    return ThreadError(
        "invalid_message",
        "a value PostgreSQL cannot store (a NUL byte, a lone surrogate or an out-of-range number)",
        thread_id=thread_id,
    )


def classify(error: BaseException) -> CruxError | None:
    """The domain error a driver error stands for; `None` for one left unclassified."""
    if isinstance(error, CruxError):
        return error
    if isinstance(error, UNSTORABLE):
        return unstorable()
    if isinstance(error, UNMIGRATED):
        return _caused(
            StorageUnavailableError(f"storage unavailable: a table is missing; {MIGRATE_REMEDY}"),
            error,
        )
    if isinstance(error, TRANSIENT):
        return _caused(
            StorageUnavailableError(f"storage unavailable ({type(error).__name__})"), error
        )
    return None


def _caused(error: CruxError, cause: BaseException) -> CruxError:
    error.__cause__ = cause
    return error


class _Classified(AbstractAsyncContextManager[None], AsyncContextDecorator):
    """Raise the domain error of a driver error raised inside (see `classify`)."""

    def __init__(self, classify_error: Callable[[BaseException], CruxError | None]) -> None:
        self._classify = classify_error

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not isinstance(exc, Exception) or isinstance(exc, CruxError):
            return
        domain = self._classify(exc)
        if domain is None or domain is exc:
            return
        # Unstorable data drops its cause (the driver's message may quote the value); the
        # others keep the driver's error as `__cause__`.
        raise domain from domain.__cause__


def storage_errors() -> _Classified:
    """Context manager and decorator of store methods: driver errors leave as domain errors.

    Example:
        ```python
        @storage_errors()
        async def find(self, key: str) -> Row | None: ...
        ```
    """
    return _Classified(classify)


def classified_by(classify_error: Callable[[BaseException], CruxError | None]) -> _Classified:
    """As `storage_errors`, with a store's own classification (the Thread store's)."""
    return _Classified(classify_error)
