"""Typed access to asyncpg and the transaction shapes the Thread store uses.

asyncpg ships no type information, so the few connection methods used here are described by
a `Protocol`. Driver errors are translated in one place (`_classifier`, on the classes of
`storage._failures`): for a publishing transaction the outcome may be unknown
(`PublicationInterruptedError`, a `ThreadCommitError`: repeat the call to repair); for a read,
nothing changed (`StorageUnavailableError`, retry freely).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, cast

import asyncpg

from storage._failures import (
    TRANSIENT,
    UNMIGRATED,
    UNSTORABLE,
    classified_by,
    unstorable,
)
from vocabulary.errors import (
    CruxError,
    PublicationInterruptedError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)


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


def _classifier(thread_id: str, *, publishing: bool) -> Callable[[BaseException], CruxError | None]:
    """How the Thread store words a driver error (on top of `storage._failures.classify`)."""

    def classify_thread_error(error: BaseException) -> CruxError | None:
        if isinstance(error, UNSTORABLE):
            return unstorable(thread_id)
        if isinstance(error, UNMIGRATED):
            unsupported = ThreadError(
                "unsupported_capability",
                "the database has no thread tables; apply the storage migrations",
                thread_id=thread_id,
            )
            unsupported.__cause__ = error
            return unsupported
        if not publishing:
            if isinstance(error, TRANSIENT):
                unreachable = StorageUnavailableError(f"thread store unreachable for {thread_id}")
                unreachable.__cause__ = error
                return unreachable
            return None
        # A publication: the outcome may be unknown, and the same call repairs.
        if isinstance(error, TRANSIENT):
            interrupted = PublicationInterruptedError(_REPEAT, thread_id=thread_id)
            interrupted.__cause__ = error
            return interrupted
        if isinstance(error, asyncpg.PostgresError):
            # The server rejected a statement: the transaction rolled back.
            rejected = ThreadCommitError(_REPEAT, thread_id=thread_id)
            rejected.__cause__ = error
            return rejected
        return None

    return classify_thread_error


_REPEAT = "publication failed; history may or may not contain it (repeat the call)"


@asynccontextmanager
async def write_transaction(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A READ COMMITTED transaction for a publishing operation.

    Raises:
        PublicationInterruptedError: Storage became unavailable (the outcome may be
            unknown; repeat the call).
        ThreadCommitError: The server rejected a statement.
        ThreadError: `invalid_message` for a value PostgreSQL cannot store,
            `unsupported_capability` when the migrations were not applied.
    """
    async with (
        classified_by(_classifier(thread_id, publishing=True)),
        pool.acquire() as raw,
        raw.transaction(),
    ):
        yield cast(Connection, raw)


@asynccontextmanager
async def single_statement(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A connection for one self-contained (autocommit) publishing statement.

    Raises:
        ThreadCommitError: As `write_transaction`.
    """
    async with classified_by(_classifier(thread_id, publishing=True)), pool.acquire() as raw:
        yield cast(Connection, raw)


@asynccontextmanager
async def read_transaction(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A read-only REPEATABLE READ transaction: every statement sees one snapshot.

    Raises:
        StorageUnavailableError: The database could not be reached.
        ThreadError: As `write_transaction`.
    """
    async with (
        classified_by(_classifier(thread_id, publishing=False)),
        pool.acquire() as raw,
        raw.transaction(isolation="repeatable_read", readonly=True),
    ):
        yield cast(Connection, raw)


@asynccontextmanager
async def single_read(pool: Any, thread_id: str) -> AsyncGenerator[Connection]:
    """A connection for one self-contained read statement (it sees one snapshot by itself).

    Raises:
        StorageUnavailableError: The database could not be reached.
        ThreadError: As `write_transaction`.
    """
    async with classified_by(_classifier(thread_id, publishing=False)), pool.acquire() as raw:
        yield cast(Connection, raw)
