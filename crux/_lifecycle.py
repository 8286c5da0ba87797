"""Closing a runtime: `runtime.close()` and `async with runtime:`.

A runtime built by `crux.connect` owns its PostgreSQL pool and closes it; one built from a
caller's own client and pool leaves them to the caller.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import asyncpg
from temporalio.client import Client


class RuntimeLifecycle:
    """`close()`, the async context manager and the connections of `Runtime`."""

    _client: Client
    _pool: asyncpg.Pool
    _owns_pool: bool = False

    @property
    def client(self) -> Client:
        """The Temporal client the runtime starts workflows with."""
        return self._client

    @property
    def pool(self) -> asyncpg.Pool:
        """The PostgreSQL pool (for `crux.thread(id=..., storage=runtime.pool)`)."""
        return self._pool

    async def close(self) -> None:
        """Release what the runtime owns: the pool `crux.connect` opened (idempotent).

        A runtime built from the caller's own pool leaves it open: the caller closes it.
        The Temporal client holds no resources that need closing.
        """
        if self._owns_pool and not self._pool.is_closing():
            await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
