"""Fixtures for the Thread store tests: a store on each test's fresh database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from crux.messages import Message, ToolCallPart
from storage.threads import ThreadSnapshot, ThreadStore


@pytest.fixture
def store(pool: asyncpg.Pool) -> ThreadStore:
    return ThreadStore(pool)


def user(message_id: str | None, text: str = "hi", **extra: object) -> Message:
    return Message(id=message_id, role="user", content=text, **extra)  # type: ignore[arg-type]


def assistant(message_id: str | None, text: str = "ok", **extra: object) -> Message:
    return Message(id=message_id, role="assistant", content=text, **extra)  # type: ignore[arg-type]


def tool_call(message_id: str, call_id: str, name: str = "lookup") -> Message:
    return Message(
        id=message_id,
        role="assistant",
        content=[ToolCallPart(tool_call_id=call_id, tool_name=name, input={"q": 1})],
    )


def tool_result(message_id: str, call_id: str, text: str = "42") -> Message:
    return Message(
        id=message_id, role="tool", content=text, tool_call_id=call_id, tool_name="lookup"
    )


def ids(snapshot: ThreadSnapshot) -> list[str]:
    return [entry.id for entry in snapshot.entries]


async def abc_def(store: ThreadStore, thread_id: str = "t") -> None:
    """Groups [a, b], [c], [d, e, f] on one path."""
    await store.append(thread_id, [user("a"), assistant("b")])
    await store.append(thread_id, user("c"))
    await store.append(thread_id, [assistant("d"), assistant("e"), assistant("f")])


class Faults:
    """Failure switches for `FaultyPool`: each fires once."""

    def __init__(self) -> None:
        self.lose_connection_after_commit = False
        self.fail_statement_containing: str | None = None
        self.lose_connection_after_statement_containing: str | None = None


class _Transaction:
    def __init__(self, inner: Any, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    async def __aenter__(self) -> Any:
        return await self._inner.__aenter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        result = await self._inner.__aexit__(exc_type, exc, tb)
        if exc_type is None and self._faults.lose_connection_after_commit:
            self._faults.lose_connection_after_commit = False
            raise asyncpg.ConnectionDoesNotExistError("connection lost after commit")
        return result


class _Connection:
    def __init__(self, raw: Any, faults: Faults) -> None:
        self._raw = raw
        self._faults = faults

    def _check(self, query: str) -> None:
        marker = self._faults.fail_statement_containing
        if marker is not None and marker in query:
            self._faults.fail_statement_containing = None
            raise asyncpg.ConnectionDoesNotExistError("connection lost mid-transaction")

    async def execute(self, query: str, *args: Any) -> Any:
        self._check(query)
        return await self._raw.execute(query, *args)

    async def fetch(self, query: str, *args: Any) -> Any:
        self._check(query)
        return await self._raw.fetch(query, *args)

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self._check(query)
        result = await self._raw.fetchrow(query, *args)
        marker = self._faults.lose_connection_after_statement_containing
        if marker is not None and marker in query:
            self._faults.lose_connection_after_statement_containing = None
            raise asyncpg.ConnectionDoesNotExistError("connection lost after the statement")
        return result

    async def fetchval(self, query: str, *args: Any) -> Any:
        self._check(query)
        return await self._raw.fetchval(query, *args)

    def transaction(self, **options: Any) -> _Transaction:
        return _Transaction(self._raw.transaction(**options), self._faults)


class FaultyPool:
    """Wraps a pool to simulate lost connections at chosen points."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.faults = Faults()

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Connection]:
        async with self._pool.acquire() as raw:
            yield _Connection(raw, self.faults)
