"""Thread store operations that publish causal groups (append, managed turns)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import asyncpg

from storage.threads._append import append_group, fast_append, lock_for_append
from storage.threads._db import single_statement, write_transaction
from storage.threads._validate import MAIN_OWNER, PreparedMessage, check_id, prepare_batch
from vocabulary.commits import ThreadCommit
from vocabulary.messages import Message


class ThreadPublisher:
    """Publishes causal groups (appends, managed turns); `ThreadStore` delegates here.

    Args:
        pool: The asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        # Typed loosely: asyncpg ships no type information.
        self._pool: Any = pool

    async def append(
        self,
        thread_id: str,
        messages: Message | Sequence[Message],
        *,
        after: str | None = None,
        owner: str = MAIN_OWNER,
    ) -> ThreadCommit:
        """Publish `messages` as one causal group."""
        batch = [messages] if isinstance(messages, Message) else list(messages)
        return await self._publish(
            thread_id, batch, owner=owner, explicit_parent=after is not None, parent_id=after
        )

    async def commit_managed_turn(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_head: str | None,
        owner: str = MAIN_OWNER,
    ) -> ThreadCommit:
        """Publish a managed turn after the head its request observed (`None` = root)."""
        return await self._publish(
            thread_id, list(messages), owner=owner, explicit_parent=True, parent_id=expected_head
        )

    async def _publish(
        self,
        thread_id: str,
        batch: list[Message],
        *,
        owner: str,
        explicit_parent: bool,
        parent_id: str | None,
    ) -> ThreadCommit:
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        if parent_id is not None:
            check_id(parent_id, "message", thread_id=thread_id)
        prepared = prepare_batch(batch, thread_id=thread_id)
        publication = asyncio.ensure_future(
            self._publish_prepared(
                thread_id,
                prepared,
                owner=owner,
                explicit_parent=explicit_parent,
                parent_id=parent_id,
            )
        )
        try:
            return await asyncio.shield(publication)
        except asyncio.CancelledError:
            # A commit that has begun is not abandoned: wait for its outcome before
            # honouring the cancellation, so no write continues unobserved.
            await asyncio.wait({publication})
            if not publication.cancelled():
                publication.exception()  # retrieved here; the caller sees the cancellation
            raise

    async def _publish_prepared(
        self,
        thread_id: str,
        prepared: list[PreparedMessage],
        *,
        owner: str,
        explicit_parent: bool,
        parent_id: str | None,
    ) -> ThreadCommit:
        async with single_statement(self._pool, thread_id) as connection:
            receipt = await fast_append(
                connection,
                thread_id,
                prepared,
                owner=owner,
                explicit_parent=explicit_parent,
                parent_id=parent_id,
            )
        if receipt is not None:
            return receipt
        async with write_transaction(self._pool, thread_id) as connection:
            control, found = await lock_for_append(
                connection,
                thread_id,
                prepared,
                owner=owner,
                explicit_parent=explicit_parent,
                parent_id=parent_id,
            )
            control.ensure_live()
            return await append_group(
                connection,
                control,
                prepared,
                owner=owner,
                explicit_parent=explicit_parent,
                parent_id=parent_id,
                found=found,
            )
