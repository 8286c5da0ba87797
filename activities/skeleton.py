"""Build the content-free request skeleton of a history source: packed per causal group.

Shared by the read activity (which stores new counts with the messages) and
`Runtime.preview` (which must write nothing). Its size is bounded by the model's strict
input ceiling, not by the Thread's length: the newest whole causal groups that could still
fit, plus one aggregate for everything older. It carries no message ids: the planner names
what it sends by position in the history source (the Thread's path at the pinned revision,
or the call-site messages), and `ids_at_positions` maps positions back to ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from planner import HistoryAggregate, HistoryColumns
from planner.history import TranscriptEntry, leading_system_prefix
from providers import TokenCounter
from storage import HistoryView, ThreadStore
from vocabulary.errors import ThreadError
from vocabulary.messages import Message


@dataclass(frozen=True)
class ThreadSkeleton:
    """A Thread's path as the planner sees it.

    Attributes:
        view: The history view read (revision and head pin the plan; positions index
            `view.messages`).
        history: The newest whole groups that could fit (and the leading system prefix),
            oldest first, packed.
        older: One aggregate for everything older (no ids).
        counted: How many messages had to be tokenized for this skeleton.
    """

    view: HistoryView
    history: HistoryColumns
    older: HistoryAggregate
    counted: int


async def thread_skeleton(
    threads: ThreadStore,
    counter: TokenCounter,
    thread_id: str,
    *,
    owner: str,
    ceiling: int,
    store_counts: bool,
) -> ThreadSkeleton:
    """Read one exact revision of a Thread and size its newest groups.

    Args:
        threads: The Thread store.
        counter: The counter for the model's encoding.
        thread_id: The Thread.
        owner: Whose selected path to read.
        ceiling: The strict input maximum; groups beyond it are aggregated.
        store_counts: Persist newly computed counts (the read activity) or not (preview).
    """
    view = await threads.read_history_view(thread_id, owner=owner, encoding=counter.encoding_name)
    # Every message is counted once per encoding and the count stored with it, so only
    # messages never seen under this encoding are tokenized here. Counting before the split
    # keeps the skeleton bounded by the ceiling and the older aggregate exact.
    missing = [e.id for e in view.messages if e.tokens is None]
    counted: dict[str, int] = {}
    if missing:
        messages = await threads.load_messages(thread_id, missing)
        counted = {
            message.id or "": tokens
            for message, tokens in zip(messages, content_tokens(counter, messages), strict=True)
        }
        if store_counts:
            await threads.store_token_counts(thread_id, counter.encoding_name, counted)
    entries = [
        e if e.tokens is not None else e.model_copy(update={"tokens": counted[e.id]})
        for e in view.messages
    ]
    history, older = pack_skeleton(entries, ceiling)
    return ThreadSkeleton(view=view, history=history, older=older, counted=len(counted))


def content_tokens(counter: TokenCounter, messages: Sequence[Message]) -> list[int]:
    """Content tokens per message, without the per-message framing the planner adds.

    The planner owns message framing (`planner.MESSAGE_FORMATS`), so stored counts hold only
    what a tokenizer sees in the message itself: text, tool-call names and arguments, media
    estimates.
    """
    return counter.count_messages(messages)


_E = TypeVar("_E", bound=TranscriptEntry)


def _group_spans(entries: Sequence[TranscriptEntry]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(entries)):
        if entries[index].group_id != entries[index - 1].group_id:
            spans.append((start, index))
            start = index
    if entries:
        spans.append((start, len(entries)))
    return spans


def newest_groups(entries: Sequence[_E], ceiling: int) -> tuple[list[_E], list[_E]]:
    """Split a path into the newest whole groups that could fit `ceiling` and the rest.

    Uncounted messages are assumed to cost one token each, so the split never drops a group
    that could have fitted; the planner decides with the real counts.
    """
    total = 0
    cut = len(entries)
    for start, end in reversed(_group_spans(entries)):
        size = sum(e.tokens if e.tokens is not None else 1 for e in entries[start:end])
        if total + size > ceiling:
            break
        total += size
        cut = start
    return list(entries[cut:]), list(entries[:cut])


@dataclass(frozen=True, slots=True)
class _CallerEntry:
    """A call-site message as the skeleton sees it (internal)."""

    role: str
    group_id: str
    tokens: int
    tool_call_ids: tuple[str, ...]
    tool_call_id: str | None


def caller_skeleton(
    counter: TokenCounter, messages: Sequence[Message], ceiling: int
) -> tuple[HistoryColumns, HistoryAggregate]:
    """Size call-site messages the way `thread_skeleton` sizes a Thread path.

    Call-site messages carry no stored groups, so groups are inferred as turns: every user
    or system message opens a group and the assistant replies, tool calls and tool results
    after it join it. A recent suffix therefore never separates a question from its answer
    or a tool call from its result, and the leading system prefix is listed always.
    Positions are indices into `messages`.
    """
    counts = content_tokens(counter, messages)
    entries = [
        _CallerEntry(
            role=message.role,
            group_id=group,
            tokens=tokens,
            tool_call_ids=tuple(c.tool_call_id for c in message.tool_calls),
            tool_call_id=message.tool_call_id,
        )
        for message, tokens, group in zip(messages, counts, caller_group_ids(messages), strict=True)
    ]
    return pack_skeleton(entries, ceiling)


def caller_group_ids(messages: Sequence[Message]) -> list[str]:
    """The causal groups of call-site messages, inferred as turns (see `caller_skeleton`).

    Every user or system message opens a group; assistant replies, tool calls and tool
    results join the group before them. The summary preparer cuts a transcript by the
    same groups, so its boundaries are the planner's.
    """
    groups: list[str] = []
    group = 0
    for index, message in enumerate(messages):
        if index == 0 or message.role in ("user", "system"):
            group = index
        groups.append(f"caller:{group}")
    return groups


def pack_skeleton(
    entries: Sequence[TranscriptEntry], ceiling: int
) -> tuple[HistoryColumns, HistoryAggregate]:
    """Pack the newest whole groups that could fit `ceiling`, and aggregate the rest.

    The leading system prefix is listed always, so no cap can drop it: the aggregate then
    lies between it and the newest groups. Every entry must carry its token count.
    """
    recent, older_entries = newest_groups(entries, ceiling)
    prefix = leading_system_prefix(entries)
    if older_entries and prefix:
        prefix = min(prefix, len(older_entries))
        recent = [*older_entries[:prefix], *recent]
        older_entries = older_entries[prefix:]
    columns = HistoryColumns.pack(recent, has_older=bool(older_entries), prefix_items=prefix)
    older = HistoryAggregate(
        count=len(older_entries),
        tokens=sum(e.tokens or 0 for e in older_entries),
        groups=len(_group_spans(older_entries)),
        calls=sum(len(e.tool_call_ids) for e in older_entries),
        prefix_items=prefix if older_entries else 0,
    )
    return columns, older


def ids_at_positions(ids: Sequence[str], ranges: Sequence[tuple[int, int]]) -> list[str]:
    """The ids a sealed plan's position ranges name, in order.

    Args:
        ids: The history source's ids, oldest first (the path at the pinned revision).
        ranges: Half-open position ranges (`SealedPlan.message_ranges`).

    Raises:
        ThreadError: `identity_conflict` when a range does not lie on the source (it
            changed since the plan was sealed).
    """
    selected: list[str] = []
    for start, end in ranges:
        if not 0 <= start <= end <= len(ids):
            raise ThreadError("identity_conflict", "the planned history is no longer on the path")
        selected.extend(ids[start:end])
    return selected


async def thread_ids_at(
    threads: ThreadStore,
    thread_id: str,
    *,
    owner: str,
    revision: str | None,
    ranges: Sequence[tuple[int, int]],
) -> list[str] | None:
    """Map position ranges on a Thread's selected path to message ids at `revision`.

    Returns:
        The ids, or `None` when the Thread is no longer at `revision` (positions name
        other messages then; the caller reads and plans again).

    Raises:
        ThreadError: `deleted` after deletion; `identity_conflict` for ranges off the path.
    """
    if not ranges:
        return []
    current, ids = await threads.path_ids(thread_id, owner=owner)
    if revision is not None and current != revision:
        return None
    return ids_at_positions(ids, ranges)
