"""The canonical Thread store on PostgreSQL.

A Thread is an immutable tree of message nodes plus one mutable control row (state, owners,
heads, version). Every writer runs in one READ COMMITTED transaction that first locks the
control row with `SELECT ... FOR UPDATE`, so publications on one Thread are linearised by
PostgreSQL; readers use one read-only REPEATABLE READ transaction, so a read sees exactly one
state. Nodes, receipts, remembered tips and the control change of one operation commit
together or not at all. An ordinary new group is published in one round trip by the SQL
function `crux_thread_fast_append` (migration 0004), which takes the same lock and answers
"slow" without writing for anything unusual (first append, replay, error cases); the full
transactional path then applies every rule.

Deliberate differences from the reference semantics (section numbers of the semantics
digest):

- Publication is one transaction (6.5). Nodes are never written outside the publishing
  transaction, so there is no crash residue and "published" simply means "stored"; there are
  no pending receipts to finalise (2.2 steps 12-13). A connection lost around COMMIT raises
  `ThreadCommitError` (outcome unknown); repeating the call replays or publishes.
- The revision is `r<version>`, a per-Thread counter bumped by every publishing mutation
  (1.5), rather than a hash of the control record: exact, cheap to compare, never reused
  because deleted markers are permanent. A Thread never written has revision `r0`.
- Group ids are the id of the group's first message (1.3), which is also the receipt key.
- Siblings (variants) are ordered by the control version that published them, then id,
  instead of creation time (2.3). The order is the same for live siblings and survives
  redaction, which erases timestamps (9.25).
- Remembered branch tips are kept per owner (2.7: "state is per owner"); an append advances
  only the appending owner's tips.
- Redaction is logical and physical in one transaction: the tombstone is durable before
  anyone can observe the redaction, so "append after a redacted target during cleanup"
  (behaviour 68) cannot happen, and redaction never reports unfinished cleanup. It also
  deletes the message's token counts, every derived artifact whose sources overlap the
  redacted ids, and the generation staging rows that overlap them or stage a copy of a
  redacted message (2.9, 9.6). When every member of a group is redacted its receipt
  loses its commit time too.
- Media are carried by URL (remote locators or inline `data:` URLs stored in the message
  body); there is no separate asset store. Redaction and deletion erase the stored body, so
  they always reach the bytes; `unsupported_capability` for a missing asset store
  (behaviours 65, 69, 78) does not arise.
- Deletion publishes the marker in one transaction and cleans up in a second one; a failure
  in between raises `ThreadCommitError` and calling `delete` again finishes (2.11). Reads
  observe `deleted` as soon as the marker commits.
- `read_history_view` leaves out a causal group whole when any member is redacted or removed
  (DESIGN in 2.9 / 9.7), since a model must never see an incomplete group.
- An owner that has no head yet selects its first publication wherever it lands (2.2 step
  11 would make it an `alternative` unless it is published at the root), so a new durable
  owner can start from a group end of another owner's path with `after`.
- Plain appends (without `after`) choose the owner's head as parent under the control row
  lock, so two plain appends never observe the same head: both are `selected`, one after
  the other. Writers that pinned an observed head (`after`, managed expected heads) race
  exactly as 2.2's concurrency law says.
- Non-`main` owners must be registered open to publish or navigate (`invalid_message`
  otherwise); any owner may read. `release_owner` removes a registration, which deletion
  requires (2.11's "delete the Sessions first"). Messages only that owner could reach stay
  stored and keep counting as siblings (1.1's reachability is not re-evaluated).
- Cancelling `append` / `commit_managed_turn` while the publication is in flight does not
  abandon it: the call waits for the commit's outcome, then raises `CancelledError`
  (2.13 item 7: a commit in flight is not cancelled by a time budget).
- Operations on a Thread that was never written: `edit`, `select`, `redact` and removal fail
  `not_found`; `read` returns the empty snapshot; `delete` creates a deleted marker.
- Each node carries a branch counter (`child_groups`, the number of groups published right
  after it) so that reads learn which group starts have variants without a sibling query.
  It is the only write to a node besides the erasure transitions and is not part of the
  node's identity.
- An edit replay is recognised before the target's shape is checked, so replaying an edit
  returns its receipt even after the target's group was removed (2.5 checks the shape
  first and would fail `invalid_group`).
- `load_messages` returns removed messages (their content is kept as provenance); only
  redacted ids fail. `store_token_counts` silently drops counts for ids redacted meanwhile.
- The revision covers the whole control row (1.5), so another owner's change also
  invalidates a pinned revision.
- Tool-call ids must be non-empty and free of control characters (`invalid_message`).
- A database without the Thread tables reports `unsupported_capability` (behaviour 82's
  "store without the capability"); any other server error inside a publishing transaction
  is reported as `ThreadCommitError` (the transaction rolled back; repeating is safe).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import asyncpg

from storage.threads import _erasure, _navigate, _owners
from storage.threads._append import append_group, fast_append, lock_for_append
from storage.threads._control import EMPTY_REVISION, load_control
from storage.threads._db import read_transaction, single_statement, write_transaction
from storage.threads._history import build_history_view, load_stored_messages, read_path_ids
from storage.threads._models import HistoryView, ThreadSnapshot
from storage.threads._read import build_snapshot, check_page_options
from storage.threads._tokens import upsert_token_counts
from storage.threads._validate import (
    MAIN_OWNER,
    PreparedMessage,
    check_id,
    normalise_id_set,
    prepare_batch,
)
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ThreadError
from vocabulary.messages import JsonValue, Message, Part

OwnerState = Literal["open", "closed"]


class ThreadStore:
    """Threads in PostgreSQL (run the migrations in `storage/migrations` first).

    Args:
        pool: An asyncpg pool. Any pool works; JSON is exchanged as text, so no codec is needed.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool: Any = pool

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool this store uses."""
        pool: asyncpg.Pool = self._pool
        return pool

    # -- publication ---------------------------------------------------------------------

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
        """Publish a managed turn after the head its request observed (`None` = root).

        The receipt is `selected` when the head is still `expected_head`, else
        `alternative` (never rebased). Replays of the same ids return the stored receipt.

        Raises:
            ThreadError: As `append`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
            asyncio.CancelledError: Cancelled; raised only after a publication that had begun
                finished (successfully or not).
        """
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

    # -- reads -----------------------------------------------------------------------------

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
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(owner, "owner", thread_id=thread_id)
        check_page_options(thread_id, before=before, limit=limit)
        for value in (at, before):
            if value is not None:
                check_id(value, "message", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
            return await build_snapshot(
                connection, control, thread_id, owner=owner, at=at, before=before, limit=limit
            )

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
        check_id(thread_id, "thread", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
            return await build_history_view(
                connection, control, thread_id, owner=owner, encoding=encoding
            )

    async def path_ids(
        self, thread_id: str, *, owner: str = MAIN_OWNER, head: str | None = None
    ) -> tuple[str, tuple[str, ...]]:
        """The revision and the message ids of `read_history_view`, without the rest.

        Args:
            thread_id: The Thread.
            owner: Whose head to read.
            head: Read the path that ends at this message instead of the owner's head.

        Raises:
            ThreadError: `deleted` after deletion.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
            return await read_path_ids(connection, control, thread_id, owner=owner, head=head)

    async def load_messages(self, thread_id: str, ids: Sequence[str]) -> list[Message]:
        """Canonical messages by id, in the order of `ids`, each with `id` set.

        Raises:
            ThreadError: `not_found`, `redacted` or `deleted`.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
            return await load_stored_messages(connection, control, thread_id, list(ids))

    async def revision(self, thread_id: str) -> str:
        """The current revision.

        Raises:
            ThreadError: `deleted` after deletion.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        async with read_transaction(self._pool, thread_id) as connection:
            control = await load_control(connection, thread_id)
        if control is None:
            return EMPTY_REVISION
        control.ensure_live()
        return control.revision

    async def validate_revision(
        self, thread_id: str, revision: str, *, owner: str = MAIN_OWNER
    ) -> None:
        """Check that the Thread is still at `revision` (pinned by a sealed request plan).

        The revision covers the whole control state, so any owner's change invalidates it;
        `owner` is accepted for symmetry with the other managed calls.

        Raises:
            ThreadError: `identity_conflict` when it changed, `deleted` after deletion.
        """
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
        """Store per-message token counts for `encoding` (idempotent upsert).

        Counts for messages redacted meanwhile are dropped silently.

        Raises:
            ThreadError: `invalid_message`, `not_found` or `deleted`.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        async with write_transaction(self._pool, thread_id) as connection:
            await upsert_token_counts(connection, thread_id, encoding, counts)

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
        """Publish a replacement for a sole-member user message as a new selected sibling.

        Raises:
            ThreadError: `not_found`, `redacted`, `invalid_group`, `identity_conflict`,
                `invalid_message` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
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
        """Select a sibling branch, restoring its remembered continuation.

        Returns:
            The snapshot at the new head, read in the selecting transaction.

        Raises:
            ThreadError: `not_found`, `invalid_group` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        return await _navigate.select(self._pool, thread_id, message_id, owner=owner)

    # -- erasure ---------------------------------------------------------------------------

    async def redact(self, thread_id: str, ids: str | Sequence[str]) -> None:
        """Erase messages irreversibly, leaving structural tombstones (atomic, idempotent).

        Raises:
            ThreadError: `invalid_message`, `not_found` or `deleted`.
            ThreadCommitError: The outcome is unknown; repeat the same call.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        normalised = normalise_id_set(ids, thread_id=thread_id)
        await _erasure.redact(self._pool, thread_id, normalised)

    async def remove_group(self, thread_id: str, message_id: str) -> None:
        """Hide the whole causal group of `message_id`, keeping provenance (internal).

        Raises:
            ThreadError: `not_found` or `deleted`.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        check_id(message_id, "message", thread_id=thread_id)
        await _erasure.remove_group(self._pool, thread_id, message_id)

    async def delete(self, thread_id: str) -> None:
        """Delete the Thread permanently, leaving a deleted marker (idempotent).

        Raises:
            ThreadInUseError: Owners are still registered.
            ThreadCommitError: Cleanup did not finish; calling `delete` again completes it.
        """
        check_id(thread_id, "thread", thread_id=thread_id)
        await _erasure.delete(self._pool, thread_id)

    # -- owners ----------------------------------------------------------------------------

    async def register_owner(
        self, thread_id: str, owner_id: str, *, state: OwnerState = "open"
    ) -> None:
        """Register a durable owner with its own head.

        Raises:
            ThreadError: `identity_conflict` for `main` or a different registered state,
                `invalid_message` for a bad state, `deleted` after deletion.
        """
        await _owners.register(self._pool, thread_id, owner_id, state)

    async def close_owner(self, thread_id: str, owner_id: str) -> None:
        """Mark a registered owner closed (it keeps blocking deletion until released).

        Raises:
            ThreadError: `not_found` for an unregistered owner, `deleted` after deletion.
        """
        await _owners.close(self._pool, thread_id, owner_id)

    async def release_owner(self, thread_id: str, owner_id: str) -> None:
        """Remove an owner's registration, head and remembered tips (idempotent).

        Raises:
            ThreadError: `identity_conflict` for `main`, `deleted` after deletion.
        """
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
