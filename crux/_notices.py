"""Commit notices: a caller learns its turn committed from PostgreSQL, as it commits.

A generation's workflow closes a few milliseconds after its turn is committed: the
activity that committed reports back, a last workflow task runs, and the client's long
poll returns. The commit itself wakes listeners on `storage.RESULT_CHANNEL` when it records
the result, so a caller whose run does nothing after the commit that could change its
outcome reads the committed result then, while the run closes.

One connection per runtime listens, for every generation the runtime is waiting on. It is
borrowed from the pool while any generation is watched, and returned once none has been
for `LINGER_SECONDS`. A notice only ever shortens a wait: when the connection cannot be
had, is lost, or the notice never comes (a pooler that does not forward notifications, say),
the caller waits for its workflow as it would without one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import asyncpg

from contracts.generation import GenerationInput
from storage import RESULT_CHANNEL
from vocabulary.ids import generation_key

LINGER_SECONDS = 2.0
"""How long the listening connection stays borrowed after the last watch ended."""

ACQUIRE_SECONDS = 1.0
"""How long listening waits for a pooled connection before going without."""

RETRY_SECONDS = 5.0
"""After a failed attempt to listen, watches go without notices this long."""


def settled_at_commit(request: GenerationInput) -> bool:
    """Whether nothing the run does after its commit can change what its caller receives.

    Success hooks report into the outcome, a time budget can fail a late commit, a cache
    write and a summary scheduled for later turns are things the next call may expect to
    find: those runs are waited for to the end.
    """
    return (
        not request.on_success
        and request.time_budget_seconds is None
        and (request.cache is None or not request.cache.enabled)
        and request.history.kind != "managed"
    )


CLOSING_WATCH_SECONDS = 60.0
"""How long a run answered at its commit is followed to its close (`runs_closed`)."""

_closing: set[asyncio.Future[Any]] = set()
_workers_here = 0


def follow_to_close(answer: asyncio.Future[Any]) -> None:
    """Keep following a run whose caller was answered at its commit, until it closes.

    Only while a worker runs in this process (`serving`): that worker lets the run close
    before it stops, so a script that generates and then stops its worker leaves no run
    open behind it. A process without a worker has no reason to follow the run.
    """
    if not _workers_here:
        answer.cancel()
        return
    _closing.add(answer)
    timer = asyncio.get_running_loop().call_later(CLOSING_WATCH_SECONDS, answer.cancel)

    def closed(done: asyncio.Future[Any]) -> None:
        timer.cancel()
        _closing.discard(done)
        if not done.cancelled():
            done.exception()  # seen: how the run closed is its own record's concern

    answer.add_done_callback(closed)


@asynccontextmanager
async def serving(within: float = CLOSING_WATCH_SECONDS) -> AsyncGenerator[None]:
    """Mark a worker running in this process for the block; on exit, let runs close first.

    The runs this process's callers were answered for at their commit close with their
    next workflow task, which this worker may be the one to run: it stops polling only once
    they closed, or after `within` seconds.
    """
    global _workers_here
    _workers_here += 1
    try:
        yield
    finally:
        try:
            await runs_closed(within)
        finally:
            _workers_here -= 1


async def runs_closed(within: float = CLOSING_WATCH_SECONDS) -> None:
    """Wait (at most `within` seconds) for this loop's runs answered at their commit to close."""
    loop = asyncio.get_running_loop()
    pending = {answer for answer in _closing if answer.get_loop() is loop}
    if pending:
        await asyncio.wait(pending, timeout=within)


@dataclass(frozen=True)
class Notice:
    """The watch on one generation's commit.

    Attributes:
        request: The generation watched.
        committed: Completes when its result is recorded (the turn is committed).
    """

    request: GenerationInput
    committed: asyncio.Future[None]


class CommitNotices:
    """Wakes the runtime's callers when their generation's result is recorded.

    Args:
        pool: The pool the listening connection is borrowed from.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool: Any = pool
        self._watchers: dict[str, list[asyncio.Future[None]]] = {}
        self._connection: Any = None
        self._opening: asyncio.Task[None] | None = None
        self._release: asyncio.TimerHandle | None = None
        self._failed_at = float("-inf")
        self._closed = False
        self._background: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> bool:
        """Whether a connection listens for commits now."""
        return self._connection is not None

    @asynccontextmanager
    async def watching(self, request: GenerationInput) -> AsyncGenerator[Notice | None]:
        """The notice of `request`'s commit, while in the block; `None` when not settled then.

        The listening connection is set up in the background: a notice that arrives before
        it listens is missed, which only means the caller waits for the workflow.
        """
        if self._closed or not settled_at_commit(request):
            yield None
            return
        key = generation_key(request.generation_id, request.thread_id)
        committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.setdefault(key, []).append(committed)
        self._listen()
        try:
            yield Notice(request, committed)
        finally:
            committed.cancel()
            watchers = self._watchers.get(key, [])
            with suppress(ValueError):
                watchers.remove(committed)
            if not watchers:
                self._watchers.pop(key, None)
            if not self._watchers:
                self._release_later()

    async def close(self) -> None:
        """Stop listening and return the connection to the pool."""
        self._closed = True
        if self._opening is not None:
            self._opening.cancel()
            with suppress(BaseException):
                await self._opening
        await self._give_back()

    def _listen(self) -> None:
        if self._release is not None:
            self._release.cancel()
            self._release = None
        if self._closed or self._connection is not None or self._opening is not None:
            return
        if time.monotonic() - self._failed_at < RETRY_SECONDS:
            return
        self._opening = asyncio.ensure_future(self._open())

    async def _open(self) -> None:
        connection: Any = None
        try:
            connection = await self._pool.acquire(timeout=ACQUIRE_SECONDS)
            await connection.add_listener(RESULT_CHANNEL, self._on_notice)
            connection.add_termination_listener(self._on_lost)
        except BaseException as error:
            if connection is not None:
                await _give_back_quietly(self._pool, connection)
            if not isinstance(error, Exception):
                raise  # cancelled by `close`
            # No connection to be had (an exhausted pool, PostgreSQL away): callers wait
            # for their workflows, and listening is tried again later.
            self._failed_at = time.monotonic()
            return
        finally:
            self._opening = None
        self._connection = connection
        if not self._watchers:
            self._release_later()

    def _on_notice(self, _connection: object, _pid: int, _channel: str, payload: object) -> None:
        for notice in self._watchers.get(str(payload), ()):
            if not notice.done():
                notice.set_result(None)

    def _on_lost(self, connection: object) -> None:
        if connection is self._connection:
            # The pool finds the connection closed when it is given back, and replaces it.
            self._connection = None
            self._failed_at = time.monotonic()
            self._spawn(_give_back_quietly(self._pool, connection))

    def _release_later(self) -> None:
        if self._connection is None or self._release is not None:
            return
        self._release = asyncio.get_running_loop().call_later(
            LINGER_SECONDS, lambda: self._spawn(self._give_back_if_idle())
        )

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)  # held until done: the loop keeps weak references only
        task.add_done_callback(self._background.discard)

    async def _give_back_if_idle(self) -> None:
        self._release = None
        if not self._watchers:
            await self._give_back()

    async def _give_back(self) -> None:
        if self._release is not None:
            self._release.cancel()
            self._release = None
        connection, self._connection = self._connection, None
        if connection is None:
            return
        with suppress(Exception):
            connection.remove_termination_listener(self._on_lost)
            # UNLISTEN before the connection is shared again (the pool does not reset it).
            await connection.remove_listener(RESULT_CHANNEL, self._on_notice)
        await _give_back_quietly(self._pool, connection)


async def _give_back_quietly(pool: Any, connection: Any) -> None:
    """Return `connection` to `pool`; a lost connection is the pool's to replace."""
    with suppress(Exception):
        await pool.release(connection)
