"""`ThreadStore`: the canonical Thread store on PostgreSQL, composed of its three roles.

Publication (`ThreadPublisher`), reads (`ThreadReader`) and upkeep (`ThreadUpkeep`) each
hold the pool and nothing else; the store builds them and delegates. How the store departs
from the reference semantics, deliberately, is listed in the `storage.threads` package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import asyncpg

from storage.threads._models import HistoryView, ThreadSnapshot
from storage.threads._pinned import PathSelection
from storage.threads._store_publication import ThreadPublisher
from storage.threads._store_reads import ThreadReader
from storage.threads._store_upkeep import OwnerState, ThreadUpkeep
from storage.threads._validate import MAIN_OWNER
from vocabulary.commits import ThreadCommit
from vocabulary.messages import JsonValue, Message, Part

__all__ = ["OwnerState", "ThreadStore"]


class ThreadStore:
    """Threads in PostgreSQL (run the migrations in `storage/migrations` first).

    The operations are grouped by role: publication (`append`, `commit_managed_turn`),
    reads (`read`, `read_history_view`, `load_messages`, `revision`, `validate_revision`,
    `store_token_counts`) and upkeep (`edit`, `select`, `redact`, `remove_group`,
    `delete` and the owner registrations).

    Args:
        pool: An asyncpg pool. Any pool works; JSON is exchanged as text, so no codec is needed.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._publication = ThreadPublisher(pool)
        self._reads = ThreadReader(pool)
        self._upkeep = ThreadUpkeep(pool)

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool this store uses."""
        return self._pool

    async def append(
        self,
        thread_id: str,
        messages: Message | Sequence[Message],
        *,
        after: str | None = None,
        owner: str = MAIN_OWNER,
    ) -> ThreadCommit:
        """Publish `messages` as one causal group.

        Args:
            thread_id: The Thread.
            messages: One message or a batch (one causal group, in order).
            after: A group end to publish after. Without it the group follows the owner's
                head. The result is `selected` only when the parent is the owner's head.
            owner: The owner whose head is compared and advanced.

        Returns:
            The commit receipt; an exact replay returns the original with `replayed=True`.

        Raises:
            ThreadError: `invalid_message`, `identity_conflict`, `not_found`,
                `invalid_group`, `redacted` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        return await self._publication.append(thread_id, messages, after=after, owner=owner)

    async def commit_managed_turn(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_head: str | None,
        owner: str = MAIN_OWNER,
    ) -> ThreadCommit:
        """Publish a managed turn after the head its request observed (`None` = root).

        The receipt is `selected` when the head is still `expected_head`, else
        `alternative` (never rebased). Replays of the same ids return the stored receipt.

        Raises:
            ThreadError: As `append`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
            asyncio.CancelledError: Cancelled; raised only after a publication that had begun
                finished (successfully or not).
        """
        return await self._publication.commit_managed_turn(
            thread_id, messages, expected_head=expected_head, owner=owner
        )

    async def read(
        self,
        thread_id: str,
        *,
        at: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        owner: str = MAIN_OWNER,
    ) -> ThreadSnapshot:
        """Read the root-to-head path (or a page of it) at one consistent state.

        Args:
            thread_id: The Thread.
            at: Address this message instead of the owner's head (any published message;
                may end mid-group; never changes selection).
            before: A group start on the addressed path; the page ends just before it.
                Requires `limit`.
            limit: Page size in messages; whole groups only (one oversize group is
                returned whole).
            owner: Whose head to address.

        Raises:
            ThreadError: `invalid_message`, `invalid_group`, `not_found` or `deleted`.
        """
        return await self._reads.read(thread_id, at=at, before=before, limit=limit, owner=owner)

    async def read_history_view(
        self, thread_id: str, *, owner: str = MAIN_OWNER, encoding: str | None = None
    ) -> HistoryView:
        """The content-free selected path at one exact revision.

        Args:
            thread_id: The Thread.
            owner: Whose head to read.
            encoding: Token counts of this encoding are attached (`None` where not counted).

        Raises:
            ThreadError: `deleted` after deletion.
        """
        return await self._reads.read_history_view(thread_id, owner=owner, encoding=encoding)

    async def path_ids(
        self, thread_id: str, *, owner: str = MAIN_OWNER
    ) -> tuple[str, tuple[str, ...]]:
        """The revision and the message ids of `read_history_view` (positions index them).

        Raises:
            ThreadError: `deleted` after deletion.
        """
        return await self._reads.path_ids(thread_id, owner=owner)

    async def selected(
        self,
        thread_id: str,
        *,
        owner: str = MAIN_OWNER,
        ranges: Sequence[tuple[int, int]],
        revision: str | None = None,
    ) -> PathSelection | None:
        """The messages at position `ranges` of the selected path, in one read.

        Positions index `path_ids`. One walk of the path checks the revision and returns
        the ids at the positions with their messages, so a sealed plan's history is checked
        and loaded without looking each message up by id.

        Args:
            thread_id: The Thread.
            owner: Whose selected path.
            ranges: Half-open position ranges, in the order the messages are wanted.
            revision: The revision the positions were taken at (`None`: any).

        Returns:
            The selection, or `None` when the Thread is no longer at `revision`.

        Raises:
            ThreadError: `deleted` after deletion; `identity_conflict` for a range that
                does not lie on the path.
        """
        return await self._reads.selected(thread_id, owner=owner, ranges=ranges, revision=revision)

    async def load_messages(self, thread_id: str, ids: Sequence[str]) -> list[Message]:
        """Canonical messages by id, in the order of `ids`, each with `id` set.

        Raises:
            ThreadError: `not_found`, `redacted` or `deleted`.
        """
        return await self._reads.load_messages(thread_id, ids)

    async def revision(self, thread_id: str) -> str:
        """The current revision.

        Raises:
            ThreadError: `deleted` after deletion.
        """
        return await self._reads.revision(thread_id)

    async def validate_revision(
        self, thread_id: str, revision: str, *, owner: str = MAIN_OWNER
    ) -> None:
        """Check that the Thread is still at `revision` (pinned by a sealed request plan).

        The revision covers the whole control state, so any owner's change invalidates it;
        `owner` is accepted for symmetry with the other managed calls.

        Raises:
            ThreadError: `identity_conflict` when it changed, `deleted` after deletion.
        """
        await self._reads.validate_revision(thread_id, revision, owner=owner)

    async def store_token_counts(
        self, thread_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        """Store per-message token counts for `encoding` (idempotent upsert).

        Counts for messages redacted meanwhile are dropped silently.

        Raises:
            ThreadError: `invalid_message`, `not_found` or `deleted`.
        """
        await self._reads.store_token_counts(thread_id, encoding, counts)

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
        """Publish a replacement for a sole-member user message as a new selected sibling.

        Raises:
            ThreadError: `not_found`, `redacted`, `invalid_group`, `identity_conflict`,
                `invalid_message` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        return await self._upkeep.edit(
            thread_id, message_id, content=content, id=id, metadata=metadata, owner=owner
        )

    async def select(
        self, thread_id: str, message_id: str, *, owner: str = MAIN_OWNER
    ) -> ThreadSnapshot:
        """Select a sibling branch, restoring its remembered continuation.

        Returns:
            The snapshot at the new head, read in the selecting transaction.

        Raises:
            ThreadError: `not_found`, `invalid_group` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        return await self._upkeep.select(thread_id, message_id, owner=owner)

    async def redact(self, thread_id: str, ids: str | Sequence[str]) -> None:
        """Erase messages irreversibly, leaving structural tombstones (atomic, idempotent).

        Raises:
            ThreadError: `invalid_message`, `not_found` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        await self._upkeep.redact(thread_id, ids)

    async def remove_group(self, thread_id: str, message_id: str) -> None:
        """Hide the whole causal group of `message_id`, keeping provenance (internal).

        Raises:
            ThreadError: `not_found` or `deleted`.
        """
        await self._upkeep.remove_group(thread_id, message_id)

    async def delete(self, thread_id: str) -> None:
        """Delete the Thread permanently, leaving a deleted marker (idempotent).

        Raises:
            ThreadInUseError: Owners are still registered.
            ThreadCommitError: Cleanup did not finish; calling `delete` again completes it.
        """
        await self._upkeep.delete(thread_id)

    async def register_owner(
        self, thread_id: str, owner_id: str, *, state: OwnerState = "open"
    ) -> None:
        """Register a durable owner with its own head.

        Raises:
            ThreadError: `identity_conflict` for `main` or a different registered state,
                `invalid_message` for a bad state, `deleted` after deletion.
        """
        await self._upkeep.register_owner(thread_id, owner_id, state=state)

    async def close_owner(self, thread_id: str, owner_id: str) -> None:
        """Mark a registered owner closed (it keeps blocking deletion until released).

        Raises:
            ThreadError: `not_found` for an unregistered owner, `deleted` after deletion.
        """
        await self._upkeep.close_owner(thread_id, owner_id)

    async def release_owner(self, thread_id: str, owner_id: str) -> None:
        """Remove an owner's registration, head and remembered tips (idempotent).

        Raises:
            ThreadError: `identity_conflict` for `main`, `deleted` after deletion.
        """
        await self._upkeep.release_owner(thread_id, owner_id)

    async def owners(self, thread_id: str) -> dict[str, OwnerState]:
        """The registered owners and their states."""
        return await self._upkeep.owners(thread_id)
