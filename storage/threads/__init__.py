"""Canonical Threads on PostgreSQL: the store, its read shapes and the history view.

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

from storage.threads._control import EMPTY_REVISION
from storage.threads._history import stored_message_json
from storage.threads._models import (
    HistoryEntry,
    HistoryView,
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    VariantInfo,
)
from storage.threads._pinned import PathSelection
from storage.threads._validate import MAIN_OWNER, MAX_ID_LENGTH, check_storable
from storage.threads._validate import check_id as validate_id
from storage.threads.store import OwnerState, ThreadStore

__all__ = [
    "EMPTY_REVISION",
    "HistoryEntry",
    "HistoryView",
    "MAIN_OWNER",
    "MAX_ID_LENGTH",
    "MessageEntry",
    "OwnerState",
    "PathSelection",
    "RedactedEntry",
    "RemovedEntry",
    "ThreadEntry",
    "ThreadSnapshot",
    "ThreadStore",
    "VariantInfo",
    "check_storable",
    "stored_message_json",
    "validate_id",
]
