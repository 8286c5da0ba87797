"""The public Thread handle: a canonical conversation in PostgreSQL, usable without Temporal.

```python
conversation = thread(id="support:ticket-42", storage=pool)
first = await conversation.append(Message(id="message:1", role="user", content="Hi"))
again = await conversation.append(Message(id="message:1", role="user", content="Hi"))
assert again.replayed
snapshot = await conversation.read(limit=20)
```

Creating a handle performs no I/O and does not create the Thread. Storage is resolved on
the first operation; a handle without storage fails every operation with
`ThreadError(code="unsupported_capability")`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
from pydantic import ValidationError

from crux._thread_observing import observed
from storage.threads import (
    EMPTY_REVISION,
    MAIN_OWNER,
    HistoryEntry,
    HistoryView,
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    ThreadStore,
    VariantInfo,
    validate_id,
)
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.messages import JsonValue, Message, Part

MessageInput = Message | Mapping[str, Any]
"""A canonical message, or a mapping with the same fields."""


def _as_message(value: object, thread_id: str) -> Message:
    if isinstance(value, Message):
        return value
    if not isinstance(value, Mapping):
        raise ThreadError("invalid_message", "not a message or a mapping", thread_id=thread_id)
    try:
        return Message.model_validate(dict(value))  # pyright: ignore[reportUnknownArgumentType]
    except ValidationError:
        # Not chained: pydantic's error quotes the rejected values, message text included.
        raise ThreadError("invalid_message", "malformed message", thread_id=thread_id) from None


class Thread:
    """A handle on one Thread (see `thread`).

    Attributes:
        id: The Thread id.
        owner: The owner whose head this handle reads and moves (`main` by default).
    """

    def __init__(self, *, id: str, store: ThreadStore | None, owner: str = MAIN_OWNER) -> None:
        self.id = validate_id(id, "thread", thread_id=id)
        self.owner = validate_id(owner, "owner", thread_id=id)
        self._store = store

    def __repr__(self) -> str:
        return f"Thread(id={self.id!r}, owner={self.owner!r})"

    @property
    def store(self) -> ThreadStore:
        """The store behind this handle.

        Raises:
            ThreadError: `unsupported_capability` when the handle has no storage.
        """
        if self._store is None:
            raise ThreadError(
                "unsupported_capability",
                "no storage configured; pass storage=ThreadStore(pool) or an asyncpg pool",
                thread_id=self.id,
            )
        return self._store

    def for_owner(self, owner: str) -> Thread:
        """A handle on the same Thread bound to another (registered) owner's head."""
        return Thread(id=self.id, store=self._store, owner=owner)

    async def append(
        self, messages: MessageInput | Sequence[MessageInput], *, after: str | None = None
    ) -> ThreadCommit:
        """Publish one message or a batch as one causal group (see `ThreadStore.append`)."""
        store = self.store
        if isinstance(messages, Message | Mapping):
            batch = [_as_message(messages, self.id)]
        elif isinstance(messages, Sequence) and not isinstance(messages, str | bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
            batch = [_as_message(item, self.id) for item in messages]
        else:
            raise ThreadError(
                "invalid_message", "append takes a message or a list of them", thread_id=self.id
            )
        with observed("append", self.id, owner=self.owner) as outcome:
            return outcome.committed(
                await store.append(self.id, batch, after=after, owner=self.owner)
            )

    async def read(
        self, *, at: str | None = None, before: str | None = None, limit: int | None = None
    ) -> ThreadSnapshot:
        """Read the selected path, a structural prefix (`at`) or a page (`before`, `limit`)."""
        return await self.store.read(self.id, at=at, before=before, limit=limit, owner=self.owner)

    async def edit(
        self,
        message_id: str,
        *,
        content: str | list[Part],
        id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> ThreadCommit:
        """Publish an edited copy of a sole-member user message and select it."""
        store = self.store
        with observed("edit", self.id, owner=self.owner) as outcome:
            return outcome.committed(
                await store.edit(
                    self.id, message_id, content=content, id=id, metadata=metadata, owner=self.owner
                )
            )

    async def select(self, message_id: str) -> ThreadSnapshot:
        """Select an alternative branch; returns the snapshot at the new head."""
        store = self.store
        with observed("select", self.id, owner=self.owner) as outcome:
            snapshot = await store.select(self.id, message_id, owner=self.owner)
            outcome.message_ids, outcome.head = (message_id,), snapshot.head
            return snapshot

    async def redact(self, ids: str | Sequence[str]) -> None:
        """Erase messages irreversibly, leaving tombstones."""
        store = self.store
        with observed("redact", self.id) as outcome:
            outcome.message_ids = (ids,) if isinstance(ids, str) else tuple(ids)
            await store.redact(self.id, ids)

    async def delete(self) -> None:
        """Delete the Thread permanently."""
        store = self.store
        with observed("delete", self.id):
            await store.delete(self.id)

    async def revision(self) -> str:
        """The current revision."""
        return await self.store.revision(self.id)

    async def history(self, *, encoding: str | None = None) -> HistoryView:
        """The content-free selected path with the revision (managed execution reads this)."""
        return await self.store.read_history_view(self.id, owner=self.owner, encoding=encoding)


def thread(*, id: str, storage: ThreadStore | asyncpg.Pool | None = None) -> Thread:
    """Create a handle on the Thread `id` (no I/O).

    Args:
        id: Application-chosen Thread id (1-512 characters, no padding or control characters).
        storage: A `ThreadStore`, or an asyncpg pool on a migrated database.

    Raises:
        ThreadError: `invalid_message` for an invalid id.
        ConfigurationError: `storage` is neither a `ThreadStore` nor an asyncpg pool.
    """
    if storage is None or isinstance(storage, ThreadStore):
        return Thread(id=id, store=storage)
    if not isinstance(storage, asyncpg.Pool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("storage must be a ThreadStore or an asyncpg pool")
    return Thread(id=id, store=ThreadStore(storage))


__all__ = [
    "EMPTY_REVISION",
    "HistoryEntry",
    "HistoryView",
    "MessageEntry",
    "MessageInput",
    "RedactedEntry",
    "RemovedEntry",
    "Thread",
    "ThreadCommit",
    "ThreadEntry",
    "ThreadSnapshot",
    "ThreadStore",
    "VariantInfo",
    "thread",
]
