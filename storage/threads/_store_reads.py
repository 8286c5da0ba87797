"""Thread store reads: paths, the history view, messages, revisions and token counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from storage.threads._control import EMPTY_REVISION, load_control
from storage.threads._db import read_transaction, single_read, single_statement
from storage.threads._full_read import read_full_path
from storage.threads._history import load_stored_messages, read_history, read_path_ids
from storage.threads._models import HistoryView, ThreadSnapshot
from storage.threads._pinned import PathSelection, read_selected
from storage.threads._read import build_snapshot, check_page_options
from storage.threads._tokens import upsert_token_counts
from storage.threads._validate import MAIN_OWNER, check_id, check_ids
from vocabulary.errors import ThreadError
from vocabulary.messages import Message


class ThreadReader:
    """Reads of one consistent state each; `ThreadStore` delegates here.

    Args:
        pool: The asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        # Typed loosely: asyncpg ships no type information.
        self._pool: Any = pool

    async def read(
        self,
        thread_id: str,
        *,
        at: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        owner: str = MAIN_OWNER,
    ) -> ThreadSnapshot:
        """Read the root-to-head path (or a page of it) at one consistent state."""
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        check_page_options(thread_id, before=before, limit=limit)
        for value in (at, before):
            if value is not None:
                check_id(value, "message", thread_id=thread_id)
        if limit is None:
            async with single_read(self._pool, thread_id) as connection:
                return await read_full_path(connection, thread_id, owner=owner, at=at)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
            return await build_snapshot(
                connection, control, thread_id, owner=owner, at=at, before=before, limit=limit
            )

    async def read_history_view(
        self, thread_id: str, *, owner: str = MAIN_OWNER, encoding: str | None = None
    ) -> HistoryView:
        """The content-free selected path at one exact revision."""
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        if encoding is not None:
            check_id(encoding, "encoding", thread_id=thread_id)
        async with single_read(self._pool, thread_id) as connection:
            return await read_history(connection, thread_id, owner=owner, encoding=encoding)

    async def path_ids(
        self, thread_id: str, *, owner: str = MAIN_OWNER
    ) -> tuple[str, tuple[str, ...]]:
        """The revision and the message ids of `read_history_view` (positions index them)."""
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        async with single_read(self._pool, thread_id) as connection:
            return await read_path_ids(connection, thread_id, owner=owner)

    async def selected(
        self,
        thread_id: str,
        *,
        owner: str = MAIN_OWNER,
        ranges: Sequence[tuple[int, int]],
        revision: str | None = None,
    ) -> PathSelection | None:
        """The ids and messages at position `ranges` of the path, if still at `revision`."""
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        async with single_read(self._pool, thread_id) as connection:
            return await read_selected(
                connection, thread_id, owner=owner, ranges=ranges, revision=revision
            )

    async def load_messages(self, thread_id: str, ids: Sequence[str]) -> list[Message]:
        """Canonical messages by id, in the order of `ids`, each with `id` set."""
        check_id(thread_id, "thread", thread_id=thread_id)
        if isinstance(ids, str) or not isinstance(ids, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ThreadError("invalid_message", "ids must be a list of ids", thread_id=thread_id)
        checked = check_ids(ids, "message", thread_id=thread_id)
        async with single_read(self._pool, thread_id) as connection:
            return await load_stored_messages(connection, thread_id, checked)

    async def revision(self, thread_id: str) -> str:
        """The current revision."""
        check_id(thread_id, "thread", thread_id=thread_id)
        # One statement sees one snapshot by itself: no transaction round trips around it.
        async with single_read(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
        if control is None:
            return EMPTY_REVISION
        control.ensure_live()
        return control.revision

    async def validate_revision(
        self, thread_id: str, revision: str, *, owner: str = MAIN_OWNER
    ) -> None:
        """Check that the Thread is still at `revision` (pinned by a sealed request plan)."""
        check_id(owner, "owner", thread_id=thread_id)
        current = await self.revision(thread_id)
        if current != revision:
            raise ThreadError(
                "identity_conflict",
                "thread changed after the request plan was sealed",
                thread_id=thread_id,
            )

    async def store_token_counts(
        self, thread_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        """Store per-message token counts for `encoding` (idempotent upsert)."""
        check_id(thread_id, "thread", thread_id=thread_id)
        async with single_statement(self._pool, thread_id) as connection:
            await upsert_token_counts(connection, thread_id, encoding, counts)
