"""Typed access to asyncpg and the transaction shapes the Thread store uses.

asyncpg ships no type information, so the few connection methods used here are described by
a `Protocol`. Connection-level failures are translated in one place: for a publishing
transaction the outcome may be unknown (`ThreadCommitError`, repeat the call to repair); for a
read, nothing changed (`StorageUnavailableError`, retry freely).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, cast

import asyncpg

from vocabulary.errors import StorageUnavailableError, ThreadCommitError, ThreadError


class Row(Protocol):
    """A result row (asyncpg.Record)."""

    def __getitem__(self, key: str | int, /) -> Any: ...


class Connection(Protocol):
    """The subset of `asyncpg.Connection` the store uses."""

    async def fetch(self, query: str, *args: object) -> list[Row]: ...

    async def fetchrow(self, query: str, *args: object) -> Row | None: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...

    async def execute(self, query: str, *args: object) -> str: ...

    async def executemany(self, command: str, args: Sequence[Sequence[object]]) -> None: ...

    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False, deferrable: bool = False
    ) -> AbstractAsyncContextManager[Any]: ...


# Failures after which the server may or may not have committed.
_CONNECTION_ERRORS = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    ConnectionError,
    OSError,
    TimeoutError,
)

# Server-side errors of a statement inside a transaction: the transaction rolled back.
_SERVER_ERRORS = (asyncpg.PostgresError,)


# Values the server can never accept (NUL bytes, lone surrogates, out-of-range numbers):
# repeating the call cannot help, so they are `invalid_message`, never "repeat the call".
_DATA_ERRORS = (asyncpg.DataError, UnicodeEncodeError)


def _unstorable(thread_id: str) -> ThreadError:
    # Content-free: the driver's message may quote the value.
    return ThreadError(
        "invalid_message",
        "a value PostgreSQL cannot store (a NUL byte, a lone surrogate or an out-of-range number)",
        thread_id=thread_id,
    )


def _unsupported(thread_id: str, exc: Exception) -> ThreadError:
    error = ThreadError(
        "unsupported_capability",
        "the database has no thread tables; apply the storage migrations",
        thread_id=thread_id,
    )
    error.__cause__ = exc
    return error


@asynccontextmanager
async def write_transaction(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A READ COMMITTED transaction for a publishing operation.

    Raises:
        ThreadCommitError: The connection failed (the outcome may be unknown) or the server
            rejected a statement.
    """
    try:
        async with pool.acquire() as raw, raw.transaction():
            yield cast(Connection, raw)
    except ThreadError:
        raise
    except _DATA_ERRORS:
        raise _unstorable(thread_id) from None
    except asyncpg.UndefinedTableError as exc:
        raise _unsupported(thread_id, exc) from exc
    except (*_CONNECTION_ERRORS, *_SERVER_ERRORS) as exc:
        raise ThreadCommitError(
            "publication failed; history may or may not contain it (repeat the call)",
            thread_id=thread_id,
        ) from exc


@asynccontextmanager
async def single_statement(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A connection for one self-contained (autocommit) publishing statement.

    Raises:
        ThreadCommitError: As `write_transaction`.
    """
    try:
        async with pool.acquire() as raw:
            yield cast(Connection, raw)
    except ThreadError:
        raise
    except _DATA_ERRORS:
        raise _unstorable(thread_id) from None
    except (*_CONNECTION_ERRORS, *_SERVER_ERRORS) as exc:
        raise ThreadCommitError(
            "publication failed; history may or may not contain it (repeat the call)",
            thread_id=thread_id,
        ) from exc


@asynccontextmanager
async def read_transaction(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A read-only REPEATABLE READ transaction: every statement sees one snapshot.

    Raises:
        StorageUnavailableError: The database could not be reached.
    """
    try:
        async with (
            pool.acquire() as raw,
            raw.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield cast(Connection, raw)
    except ThreadError:
        raise
    except _DATA_ERRORS:
        raise _unstorable(thread_id) from None
    except asyncpg.UndefinedTableError as exc:
        raise _unsupported(thread_id, exc) from exc
    except _CONNECTION_ERRORS as exc:
        raise StorageUnavailableError(f"thread store unreachable for {thread_id}") from exc


@asynccontextmanager
async def single_read(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A connection for one self-contained read statement (it sees one snapshot by itself).

    Raises:
        StorageUnavailableError: The database could not be reached.
    """
    try:
        async with pool.acquire() as raw:
            yield cast(Connection, raw)
    except ThreadError:
        raise
    except _DATA_ERRORS:
        raise _unstorable(thread_id) from None
    except asyncpg.UndefinedTableError as exc:
        raise _unsupported(thread_id, exc) from exc
    except _CONNECTION_ERRORS as exc:
        raise StorageUnavailableError(f"thread store unreachable for {thread_id}") from exc
