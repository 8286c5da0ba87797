"""The pool every part of the Thread store shares."""

from __future__ import annotations

from typing import Any

import asyncpg


class StoreBase:
    """Holds the asyncpg pool (typed loosely: asyncpg ships no type information)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool: Any = pool

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool this store uses."""
        pool: asyncpg.Pool = self._pool
        return pool
