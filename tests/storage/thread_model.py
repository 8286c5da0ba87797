"""An in-memory reference model of one Thread, for differential tests against PostgreSQL.

It is written from the Thread semantics (the glossary, and the operations' rules for append,
read, edit, select, redaction, removal and deletion), not from `storage.threads`, and shares
no code or algorithm with it: every path is materialised whole from parent links, and every
answer is computed from that whole path with the plainest rule that states it (a page is the
longest run of whole causal groups ending at the addressed head that fits the limit, or the
newest group alone when even that one does not; a sibling is a group start with the same
parent; publication order is insertion order). A bug in the store's paging, branch
bookkeeping or variant lookup cannot repeat itself here.

Three behaviours the semantics leave open are modelled as the store defines them:
`history()` leaves out every causal group with a removed or redacted member; sibling order
is publication order (ids break no ties, as no two groups publish at once); and of two
remembered continuations equally deep and long, an edit takes the one whose branch starts
at the smaller id.

Results are rendered in a comparable, timestamp-free form:

- receipt: `(status, message_ids, parent_id, selected_head, replayed)`;
- snapshot: `(revision, head, entries, cursor)`, each entry
  `("message", id, parent_id, (role, text), variant)` with variant
  `(index, count, previous, next)` or `None`, `("removed", id, parent_id)`, or
  `("redacted", id, parent_id)`;
- history: `(revision, head, ((id, tokens), ...))`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Outcome = tuple[str, Any]
"""`("ok", value)` or `("error", code)`."""

Batch = list[tuple[str, str, str]]
"""`(message_id, role, text)` per message of one append call."""


class ModelError(Exception):
    """An operation the semantics refuse, with the error code the store must raise."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Stored:
    """One published message: where it sits, what it says, and what erasure did to it."""

    id: str
    parent: str | None
    group: str
    """Id of the first message of its causal group."""
    first: bool
    last: bool
    role: str
    text: str
    edit_of: str | None
    erased: str | None = None
    """`None` while live, then `"removed"` or `"redacted"`."""


@dataclass
class Receipt:
    """What the publication of one causal group returned the first time."""

    status: str
    message_ids: tuple[str, ...]
    parent: str | None
    selected_head: str
    edit_of: str | None

    def render(self, *, replayed: bool) -> tuple[Any, ...]:
        return (self.status, self.message_ids, self.parent, self.selected_head, replayed)


@dataclass
class ModelThread:
    """The main owner's view of one Thread (the only owner the differential test uses)."""

    exists: bool = False
    deleted: bool = False
    changes: int = 0
    """Publishing mutations so far: the revision is a function of this count alone."""
    head: str | None = None
    messages: dict[str, Stored] = field(default_factory=dict[str, Stored])
    """Every published message, in publication order (dicts keep insertion order)."""
    receipts: dict[str, Receipt] = field(default_factory=dict[str, Receipt])
    """By the first message id of each group."""
    remembered: dict[str, str] = field(default_factory=dict[str, str])
    """Remembered leaves: first message of a branch -> the last leaf visited on it."""
    tokens: dict[str, int] = field(default_factory=dict[str, int])

    # -- reading the tree ------------------------------------------------------------------

    @property
    def revision(self) -> str:
        return f"r{self.changes}"

    def _require_live(self) -> None:
        if self.deleted:
            raise ModelError("deleted")
        if not self.exists:
            raise ModelError("not_found")

    def path_to(self, leaf: str) -> list[Stored]:
        """Root-to-`leaf` path: follow parent links to the root, then reverse."""
        path: list[Stored] = []
        cursor: str | None = leaf
        while cursor is not None:
            path.insert(0, self.messages[cursor])
            cursor = self.messages[cursor].parent
        return path

    def _members(self, group: str) -> list[Stored]:
        return [m for m in self.messages.values() if m.group == group]

    def _siblings(self, parent: str | None) -> list[str]:
        """Group starts under `parent`, oldest publication first."""
        return [m.id for m in self.messages.values() if m.first and m.parent == parent]

    def _publish(
        self, batch: Batch, parent: str | None, *, edit_of: str | None = None
    ) -> list[Stored]:
        ids = [message_id for message_id, _, _ in batch]
        members = [
            Stored(
                id=message_id,
                parent=parent if index == 0 else ids[index - 1],
                group=ids[0],
                first=index == 0,
                last=index == len(batch) - 1,
                role=role,
                text=text,
                edit_of=edit_of,
            )
            for index, (message_id, role, text) in enumerate(batch)
        ]
        for member in members:
            self.messages[member.id] = member
        return members

    # -- operations ------------------------------------------------------------------------

    def append(self, batch: Batch, *, explicit: bool, parent_id: str | None) -> tuple[Any, ...]:
        """Publish `batch` as one causal group after `parent_id` (explicit) or the head."""
        ids = [message_id for message_id, _, _ in batch]
        if len(set(ids)) < len(ids):
            raise ModelError("identity_conflict")
        if self.deleted:
            raise ModelError("deleted")
        known = [self.messages[i] for i in ids if i in self.messages]
        if any(m.erased == "redacted" for m in known):
            raise ModelError("redacted")
        if known:
            return self._replay(batch, known, explicit=explicit, parent_id=parent_id)
        parent = parent_id if explicit else self.head
        if parent is not None:
            if parent not in self.messages:
                raise ModelError("not_found")
            if not self.messages[parent].last:
                raise ModelError("invalid_group")
        leaf = ids[-1]
        previous_head = self.head
        selected = previous_head == parent
        self._publish(batch, parent)
        receipt = Receipt(
            status="selected" if selected else "alternative",
            message_ids=tuple(ids),
            parent=parent,
            selected_head=leaf if selected or previous_head is None else previous_head,
            edit_of=None,
        )
        self.receipts[ids[0]] = receipt
        # Branches whose remembered leaf was the parent now end at the new leaf.
        followed = [start for start, tip in self.remembered.items() if tip == parent]
        for start in followed:
            self.remembered[start] = leaf
        if not selected and not followed:
            self.remembered[ids[0]] = leaf
        if selected:
            self.head = leaf
        self.exists = True
        self.changes += 1
        return receipt.render(replayed=False)

    def _replay(
        self, batch: Batch, known: list[Stored], *, explicit: bool, parent_id: str | None
    ) -> tuple[Any, ...]:
        """An append of ids already published: the same group again, or a conflict."""
        if len(known) < len(batch):
            raise ModelError("identity_conflict")
        receipt = self.receipts.get(known[0].id)
        same_group = receipt is not None and list(receipt.message_ids) == [m.id for m in known]
        same_messages = [(m.role, m.text) for m in known] == [(r, t) for _, r, t in batch]
        if receipt is None or not same_group or receipt.edit_of is not None or not same_messages:
            raise ModelError("identity_conflict")
        if explicit and receipt.parent != parent_id:
            raise ModelError("identity_conflict")
        return receipt.render(replayed=True)

    def edit(self, target_id: str, text: str, new_id: str) -> tuple[Any, ...]:
        """Publish a replacement of a sole-member user message beside it, and select it."""
        self._require_live()
        target = self.messages.get(target_id)
        if target is None:
            raise ModelError("not_found")
        if target.erased == "redacted":
            raise ModelError("redacted")
        if new_id in self.messages:
            existing = self.messages[new_id]
            if existing.erased == "redacted":
                raise ModelError("redacted")
            receipt = self.receipts.get(new_id)
            if (
                receipt is not None
                and existing.edit_of == target_id
                and (existing.role, existing.text) == ("user", text)
                and receipt.message_ids == (new_id,)
            ):
                return receipt.render(replayed=True)
            raise ModelError("identity_conflict")
        sole_user_message = target.role == "user" and target.first and target.last
        if target.erased is not None or not sole_user_message:
            raise ModelError("invalid_group")
        if self.head is None:
            raise ModelError("not_found")
        old_head = self.head
        current = self.path_to(old_head)
        on_current = {m.id for m in current}
        toward_parent = {m.id for m in self.path_to(target.parent)} if target.parent else set()
        # The branch being left: the first message of the current path that is not on the
        # way to the replacement's parent.
        leaving = [m.id for m in current if m.id not in toward_parent]
        if leaving:
            self.remembered[leaving[0]] = old_head
        self.remembered[target_id] = (
            old_head if target_id in on_current else self._best_continuation(target_id)
        )
        self._publish([(new_id, "user", text)], target.parent, edit_of=target_id)
        receipt = Receipt(
            status="selected",
            message_ids=(new_id,),
            parent=target.parent,
            selected_head=new_id,
            edit_of=target_id,
        )
        self.receipts[new_id] = receipt
        self.head = new_id
        self.changes += 1
        return receipt.render(replayed=False)

    def _best_continuation(self, target_id: str) -> str:
        """The remembered leaf whose path holds `target_id`: deepest branch, then longest."""
        candidates: list[tuple[int, int, str, str]] = []
        for start, leaf in self.remembered.items():
            path = [m.id for m in self.path_to(leaf)]
            if target_id in path:
                branch_depth = path.index(start) if start in path else -1
                candidates.append((-branch_depth, -len(path), start, leaf))
        return min(candidates)[3] if candidates else target_id

    def select(self, target_id: str) -> tuple[Any, ...]:
        """Make the branch starting at `target_id` the selected path; return its snapshot."""
        self._require_live()
        target = self.messages.get(target_id)
        if target is None:
            raise ModelError("not_found")
        if self.head is None:
            raise ModelError("not_found")
        old_head = self.head
        current = self.path_to(old_head)
        if target in current:
            return self.read(at=old_head)
        # The message of the current path that shares the target's parent.
        beside = [m for m in current if m.parent == target.parent]
        if not target.first or not beside:
            raise ModelError("invalid_group")
        leaf = self.remembered.get(target_id)
        if leaf is None:
            [leaf] = [m.id for m in self._members(target.group) if m.last]
        self.remembered[beside[0].id] = old_head
        self.head = leaf
        self.changes += 1
        return self.read(at=leaf)

    def redact(self, ids: list[str]) -> None:
        """Tombstone every message of `ids` at once (all must be published)."""
        if not ids:
            raise ModelError("invalid_message")
        self._require_live()
        if any(i not in self.messages for i in ids):
            raise ModelError("not_found")
        fresh = {i for i in ids if self.messages[i].erased != "redacted"}
        for message_id in fresh:
            self.messages[message_id].erased = "redacted"
            self.tokens.pop(message_id, None)
        if fresh:
            self.changes += 1

    def remove(self, message_id: str) -> None:
        """Hide the whole causal group of `message_id` (redacted members stay redacted)."""
        self._require_live()
        if message_id not in self.messages:
            raise ModelError("not_found")
        live = [m for m in self._members(self.messages[message_id].group) if m.erased is None]
        for member in live:
            member.erased = "removed"
        if live:
            self.changes += 1

    def delete(self) -> None:
        """Erase the whole Thread, leaving a deleted marker (a second delete is a no-op)."""
        if self.deleted:
            return
        self.deleted = True
        self.head = None
        self.messages.clear()
        self.receipts.clear()
        self.remembered.clear()
        self.tokens.clear()
        self.changes += 1

    def read(
        self, *, at: str | None = None, before: str | None = None, limit: int | None = None
    ) -> tuple[Any, ...]:
        """The path to `at` (or the head), cut before `before`, paged to `limit` messages."""
        if before is not None and limit is None:
            raise ModelError("invalid_group")
        if not self.exists and not self.deleted:
            return (self.revision, None, (), None)
        if self.deleted:
            raise ModelError("deleted")
        head = self.head if at is None else at
        if head is None:
            return (self.revision, None, (), None)
        if head not in self.messages:
            raise ModelError("not_found")
        path = self.path_to(head)
        if before is not None:
            older = [m.id for m in path]
            if before not in older:
                raise ModelError("not_found")
            if not self.messages[before].first:
                raise ModelError("invalid_group")
            path = path[: older.index(before)]
        page = path if limit is None else self._page(path, limit)
        cursor = page[0].id if len(page) < len(path) else None
        return (self.revision, head, tuple(self._entry(m) for m in page), cursor)

    @staticmethod
    def _page(path: list[Stored], limit: int) -> list[Stored]:
        """The longest tail of `path` made of whole groups and at most `limit` long.

        When even the newest group alone is longer than `limit`, that group is the page: a
        group is never split. The newest group may be cut short by `at` itself.
        """
        group_starts = [index for index, m in enumerate(path) if m.first]
        tails = [path[index:] for index in group_starts]
        fitting = [tail for tail in tails if len(tail) <= limit]
        if fitting:
            return max(fitting, key=len)
        return min(tails, key=len) if tails else []

    def _entry(self, message: Stored) -> tuple[Any, ...]:
        if message.erased is not None:
            return (message.erased, message.id, message.parent)
        return (
            "message",
            message.id,
            message.parent,
            (message.role, message.text),
            self._variant(message),
        )

    def _variant(self, message: Stored) -> tuple[Any, ...] | None:
        if not message.first:
            return None
        siblings = self._siblings(message.parent)
        if len(siblings) < 2:
            return None
        index = siblings.index(message.id)
        return (
            index,
            len(siblings),
            siblings[index - 1] if index > 0 else None,
            siblings[index + 1] if index < len(siblings) - 1 else None,
        )

    def store_tokens(self, counts: dict[str, int]) -> None:
        """Record token counts of messages; redacted ones keep none."""
        if not counts:
            return
        self._require_live()
        if any(i not in self.messages for i in counts):
            raise ModelError("not_found")
        for message_id, value in counts.items():
            if self.messages[message_id].erased != "redacted":
                self.tokens[message_id] = value

    def history(self) -> tuple[Any, ...]:
        """The selected path's ids and token counts, whole live groups only."""
        if not self.exists and not self.deleted:
            return (self.revision, None, ())
        if self.deleted:
            raise ModelError("deleted")
        if self.head is None:
            return (self.revision, None, ())
        path = self.path_to(self.head)
        broken = {m.group for m in path if m.erased is not None}
        return (
            self.revision,
            self.head,
            tuple((m.id, self.tokens.get(m.id)) for m in path if m.group not in broken),
        )
