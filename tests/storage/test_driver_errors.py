"""The stores raise domain errors for driver errors, classified by asyncpg's own classes.

Against a real PostgreSQL: a terminated backend, a lock wait past `lock_timeout` and a missing
table each reach the caller typed, never as a driver error (values the server refuses:
`test_unstorable_text.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable

import asyncpg
import pytest
import pytest_asyncio

from storage import GenerationStore, ReceiptStore, ThreadStore, create_pool
from storage._failures import classify
from vocabulary.errors import (
    PublicationInterruptedError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)
from vocabulary.messages import Message


@pytest_asyncio.fixture
async def admin(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own, outside every pool under test."""
    connection = await asyncpg.connect(database_url)
    try:
        yield connection
    finally:
        await connection.close()


@pytest_asyncio.fixture
async def single(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool of one connection, so the test knows which backend a store uses."""
    created = await create_pool(database_url, min_size=1, max_size=1)
    try:
        yield created
    finally:
        await created.close()


async def _cut_off_while_waiting(
    pool: asyncpg.Pool, admin: asyncpg.Connection, table: str, call: Awaitable[object]
) -> BaseException:
    """Terminate the pool's backend while `call` waits on a lock `admin` holds on `table`.

    Returns:
        What `call` raised.
    """
    pid = await pool.fetchval("SELECT pg_backend_pid()")
    async with admin.transaction():
        await admin.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        waiting = asyncio.ensure_future(call)
        while (
            await admin.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
            != "Lock"
        ):
            await asyncio.sleep(0.02)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(Exception) as raised:
            await waiting
    return raised.value


async def test_a_terminated_backend_is_storage_unavailable_with_the_driver_cause(
    single: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    raised = await _cut_off_while_waiting(
        single, admin, "crux_generations", GenerationStore(single).find_result("g1")
    )
    assert type(raised) is StorageUnavailableError
    assert isinstance(raised.__cause__, asyncpg.PostgresError | asyncpg.InterfaceError | OSError)
    assert not isinstance(raised.__cause__, asyncpg.LockNotAvailableError)


async def test_a_publication_cut_off_is_an_interrupted_commit(
    single: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    threads = ThreadStore(single)
    await threads.append("t", [Message(id="m1", role="user", content="hi")])
    raised = await _cut_off_while_waiting(
        single,
        admin,
        "crux_threads",
        threads.append("t", [Message(id="m2", role="user", content="again")]),
    )
    # Both: a repeat of the same call repairs, and waiting for storage is what helps.
    assert isinstance(raised, PublicationInterruptedError)
    assert isinstance(raised, ThreadCommitError) and isinstance(raised, StorageUnavailableError)
    assert raised.code == "commit_failed"
    # The repeat repairs.
    commit = await threads.append("t", [Message(id="m2", role="user", content="again")])
    assert commit.message_ids == ("m2",)


async def test_a_thread_read_cut_off_is_storage_unavailable(
    single: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    threads = ThreadStore(single)
    await threads.append("t", [Message(id="m1", role="user", content="hi")])
    raised = await _cut_off_while_waiting(single, admin, "crux_threads", threads.revision("t"))
    assert type(raised) is StorageUnavailableError


async def test_a_lock_wait_past_the_lock_timeout_is_storage_unavailable(
    database_url: str, admin: asyncpg.Connection
) -> None:
    await admin.execute(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L',"
        " current_database(), '100ms'); END $$"
    )
    timed = await create_pool(database_url, min_size=1, max_size=1)
    try:
        async with admin.transaction():
            await admin.execute("LOCK TABLE crux_request_receipts IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StorageUnavailableError) as raised:
                await ReceiptStore(timed).load(["request_a"])
        assert isinstance(raised.value.__cause__, asyncpg.LockNotAvailableError)
        # Once the lock is gone, the same call succeeds.
        assert await ReceiptStore(timed).load(["request_a"]) == {}
    finally:
        await timed.close()


async def test_a_missing_table_names_the_migration_command(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    await admin.execute("DROP TABLE crux_request_receipts")
    with pytest.raises(StorageUnavailableError) as raised:
        await ReceiptStore(pool).load(["request_a"])
    assert "crux db migrate" in str(raised.value) and "CRUX_MIGRATE" in str(raised.value)
    assert isinstance(raised.value.__cause__, asyncpg.UndefinedTableError)


async def test_missing_thread_tables_are_an_unsupported_capability(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    await admin.execute("DROP TABLE crux_threads CASCADE")
    with pytest.raises(ThreadError) as raised:
        await ThreadStore(pool).revision("t")
    assert raised.value.code == "unsupported_capability"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (asyncpg.exceptions.ConnectionDoesNotExistError("closed"), StorageUnavailableError),
        (asyncpg.exceptions.CannotConnectNowError("starting up"), StorageUnavailableError),
        (asyncpg.exceptions.AdminShutdownError("terminating"), StorageUnavailableError),
        (asyncpg.exceptions.QueryCanceledError("statement timeout"), StorageUnavailableError),
        (asyncpg.exceptions.TooManyConnectionsError("busy"), StorageUnavailableError),
        (asyncpg.exceptions.OutOfMemoryError("memory"), StorageUnavailableError),
        (asyncpg.exceptions.SerializationError("conflict"), StorageUnavailableError),
        (asyncpg.exceptions.DeadlockDetectedError("deadlock"), StorageUnavailableError),
        (asyncpg.exceptions.LockNotAvailableError("lock"), StorageUnavailableError),
        (asyncpg.InterfaceError("pool is closed"), StorageUnavailableError),
        (asyncpg.InternalClientError("protocol state"), StorageUnavailableError),
        (ConnectionRefusedError(111, "refused"), StorageUnavailableError),
        (TimeoutError(), StorageUnavailableError),
        (asyncpg.UndefinedColumnError("no column"), StorageUnavailableError),
        (asyncpg.UntranslatableCharacterError("secret"), ThreadError),
        (asyncpg.NumericValueOutOfRangeError("secret"), ThreadError),
        (UnicodeEncodeError("utf-8", "secret \ud800", 7, 8, "surrogates"), ThreadError),
    ],
)
def test_driver_classes_decide_the_domain_error(
    error: BaseException, expected: type[Exception]
) -> None:
    classified = classify(error)
    assert type(classified) is expected
    assert "secret" not in str(classified)


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.UniqueViolationError("duplicate"),
        asyncpg.exceptions.SyntaxOrAccessError("bug"),
        RuntimeError("not a driver error"),
    ],
)
def test_other_errors_are_left_unclassified(error: BaseException) -> None:
    assert classify(error) is None
