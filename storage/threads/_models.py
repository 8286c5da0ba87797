"""Public read shapes of the Thread store: snapshots, entries and the content-free history view."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from vocabulary.messages import JsonValue, Message, Part, Role


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VariantInfo(_Frozen):
    """Position of a group start among its published siblings (only when there are >= 2).

    Attributes:
        index: 0-based position among the siblings, in publication order.
        count: Number of siblings.
        previous: Id of the previous sibling, if any.
        next: Id of the next sibling, if any.
    """

    index: int
    count: int
    previous: str | None = None
    next: str | None = None


class MessageEntry(_Frozen):
    """A live message on a read path.

    Attributes:
        kind: Always `message`.
        id: The message id.
        parent_id: The parent message, `None` at the root.
        created_at: Publication time of the message's causal group.
        variant: Sibling position, on group starts that have alternatives.
        role: Canonical role.
        content: Canonical content.
        metadata: Application metadata.
        tool_call_id: For tool results, the call answered.
        tool_name: For tool results, the tool's name.
    """

    kind: Literal["message"] = "message"
    id: str
    parent_id: str | None = None
    created_at: datetime
    variant: VariantInfo | None = None
    role: Role
    content: str | tuple[Part, ...] = ""
    metadata: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])
    tool_call_id: str | None = None
    tool_name: str | None = None

    def to_message(self) -> Message:
        """The canonical message of this entry (with its id)."""
        return Message(
            id=self.id,
            role=self.role,
            content=self.content if isinstance(self.content, str) else list(self.content),
            metadata=self.metadata,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
        )


class RemovedEntry(_Frozen):
    """A message hidden by removal of its causal group (provenance is kept in storage).

    Attributes:
        kind: Always `removed`.
        id: The message id.
        parent_id: The parent message, `None` at the root.
        created_at: Publication time of the message's group.
    """

    kind: Literal["removed"] = "removed"
    id: str
    parent_id: str | None = None
    created_at: datetime


class RedactedEntry(_Frozen):
    """The structural tombstone of a redacted message: no role, content, metadata or time.

    Attributes:
        kind: Always `redacted`.
        id: The message id (reserved forever).
        parent_id: The parent message, `None` at the root.
    """

    kind: Literal["redacted"] = "redacted"
    id: str
    parent_id: str | None = None


ThreadEntry = Annotated[MessageEntry | RemovedEntry | RedactedEntry, Field(discriminator="kind")]
"""One entry of a read path."""


class ThreadSnapshot(_Frozen):
    """One consistent read of a Thread path.

    Attributes:
        thread_id: The Thread.
        revision: Revision of the control state the read observed.
        head: The addressed head (`at` or the owner's head), even for an older page.
        entries: Root-to-head entries of the page (a tuple: snapshots are immutable).
        cursor: Set only when the page is shorter than the addressed path: the id of the
            page's first entry, to pass as `before` for the next older page.
    """

    thread_id: str
    revision: str
    head: str | None = None
    entries: tuple[ThreadEntry, ...] = ()
    cursor: str | None = None


class HistoryEntry(_Frozen):
    """Content-free description of one live message on the selected path.

    Attributes:
        id: The message id.
        role: Canonical role.
        group_id: Id of the causal group (its first message's id).
        seq: 0-based position inside the group.
        group_end: True on the group's last message.
        parent_id: The parent message, `None` at the root.
        tool_call_ids: Tool-call ids requested by an assistant message.
        tool_call_id: For tool results, the call answered.
        tokens: Stored count for the requested encoding; `None` when not counted yet.
        has_media: True when the content has image or file parts.
    """

    id: str
    role: Role
    group_id: str
    seq: int
    group_end: bool
    parent_id: str | None
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    tokens: int | None = None
    has_media: bool = False


class HistoryView(_Frozen):
    """Content-free view of the selected path at one exact revision.

    Lists only live messages, root to head. A causal group with any redacted or removed
    member is left out whole, because a model must never see an incomplete group.

    Attributes:
        thread_id: The Thread.
        revision: The revision observed (pin it and pass it to `validate_revision`).
        head: The owner's selected head, `None` for an empty Thread.
        messages: The entries, root to head.
    """

    thread_id: str
    revision: str
    head: str | None = None
    messages: tuple[HistoryEntry, ...] = ()

    @property
    def message_ids(self) -> tuple[str, ...]:
        """The ids of `messages`, in order."""
        return tuple(entry.id for entry in self.messages)
