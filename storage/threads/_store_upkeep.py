"""Thread store navigation, erasure and owner registrations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import asyncpg

from storage.threads import _erasure, _navigate, _owners
from storage.threads._control import load_control
from storage.threads._db import read_transaction
from storage.threads._models import ThreadSnapshot
from storage.threads._validate import MAIN_OWNER, check_id, normalise_id_set
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ThreadError
from vocabulary.messages import JsonValue, Part

OwnerState = Literal["open", "closed"]


class ThreadUpkeep:
    """Edits, branch selection, erasure and owners; `ThreadStore` delegates here.

    Args:
        pool: The asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        # Typed loosely: asyncpg ships no type information.
        self._pool: Any = pool

    # -- navigation ------------------------------------------------------------------------

    async def edit(
        self,
        thread_id: str,
        message_id: str,
        *,
        content: str | list[Part],
        id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        owner: str = MAIN_OWNER,
    ) -> ThreadCommit:
        """Publish a replacement for a sole-member user message as a new selected sibling."""
        if metadata is not None and not isinstance(metadata, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ThreadError("invalid_message", "edit metadata must be a mapping")
        return await _navigate.edit(
            self._pool,
            thread_id,
            message_id,
            content=content,
            replacement_id=id,
            metadata=dict(metadata or {}),
            owner=owner,
        )

    async def select(
        self, thread_id: str, message_id: str, *, owner: str = MAIN_OWNER
    ) -> ThreadSnapshot:
        """Select a sibling branch, restoring its remembered continuation."""
        return await _navigate.select(self._pool, thread_id, message_id, owner=owner)

    # -- erasure ---------------------------------------------------------------------------

    async def redact(self, thread_id: str, ids: str | Sequence[str]) -> None:
        """Erase messages irreversibly, leaving structural tombstones (atomic, idempotent)."""
        check_id(thread_id, "thread", thread_id=thread_id)
        normalised = normalise_id_set(ids, thread_id=thread_id)
        await _erasure.redact(self._pool, thread_id, normalised)

    async def remove_group(self, thread_id: str, message_id: str) -> None:
        """Hide the whole causal group of `message_id`, keeping provenance (internal)."""
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(message_id, "message", thread_id=thread_id)
        await _erasure.remove_group(self._pool, thread_id, message_id)

    async def delete(self, thread_id: str) -> None:
        """Delete the Thread permanently, leaving a deleted marker (idempotent)."""
        check_id(thread_id, "thread", thread_id=thread_id)
        await _erasure.delete(self._pool, thread_id)

    # -- owners ----------------------------------------------------------------------------

    async def register_owner(
        self, thread_id: str, owner_id: str, *, state: OwnerState = "open"
    ) -> None:
        """Register a durable owner with its own head."""
        await _owners.register(self._pool, thread_id, owner_id, state)

    async def close_owner(self, thread_id: str, owner_id: str) -> None:
        """Mark a registered owner closed (it keeps blocking deletion until released)."""
        await _owners.close(self._pool, thread_id, owner_id)

    async def release_owner(self, thread_id: str, owner_id: str) -> None:
        """Remove an owner's registration, head and remembered tips (idempotent)."""
        await _owners.release(self._pool, thread_id, owner_id)

    async def owners(self, thread_id: str) -> dict[str, OwnerState]:
        """The registered owners and their states."""
        check_id(thread_id, "thread", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
        if control is None:
            return {}
        return {
            key: "closed" if value == "closed" else "open" for key, value in control.owners.items()
        }
