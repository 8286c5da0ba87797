"""Build the content-free request skeleton of a Thread: ids, roles, groups, token counts.

Shared by the read activity (which stores new counts with the messages) and
`Runtime.preview` (which must write nothing). Its size is bounded by the model's strict
input ceiling, not by the Thread's length: the newest whole causal groups that could still
fit, plus one aggregate for everything older.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner import HistoryAggregate, HistoryItem
from planner.history import leading_system_prefix
from providers import TokenCounter
from storage import HistoryEntry, HistoryView, ThreadStore
from vocabulary.messages import Message


@dataclass(frozen=True)
class ThreadSkeleton:
    """A Thread's path as the planner sees it.

    Attributes:
        view: The history view read (revision and head pin the plan).
        history: The newest whole groups that could fit, oldest first.
        older: One aggregate for everything older.
        counted: How many messages had to be tokenized for this skeleton.
    """

    view: HistoryView
    history: list[HistoryItem]
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
    recent, older_entries = newest_groups(entries, ceiling)
    prefix = leading_system_prefix(entries)
    if older_entries and prefix:
        # The leading system prefix is listed always, so no cap can drop it: the aggregate
        # then lies between it and the newest groups.
        prefix = min(prefix, len(older_entries))
        recent = [*older_entries[:prefix], *recent]
        older_entries = older_entries[prefix:]
    history = [
        HistoryItem(
            id=e.id,
            role=e.role,
            group_id=e.group_id,
            tokens=e.tokens or 0,
            tool_call_ids=tuple(e.tool_call_ids),
            tool_call_id=e.tool_call_id,
        )
        for e in recent
    ]
    older = HistoryAggregate(
        count=len(older_entries),
        tokens=sum(e.tokens or 0 for e in older_entries),
        first_id=older_entries[0].id if older_entries else None,
        last_id=older_entries[-1].id if older_entries else None,
        prefix_items=prefix if older_entries else 0,
    )
    return ThreadSkeleton(view=view, history=history, older=older, counted=len(counted))


def content_tokens(counter: TokenCounter, messages: Sequence[Message]) -> list[int]:
    """Content tokens per message, without the per-message framing the planner adds.

    The planner owns message framing (`planner.MESSAGE_FORMATS`), so stored counts hold only
    what a tokenizer sees in the message itself: text, tool-call names and arguments, media
    estimates.
    """
    return counter.count_messages(messages)


def _group_spans(entries: Sequence[HistoryEntry]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(entries)):
        if entries[index].group_id != entries[index - 1].group_id:
            spans.append((start, index))
            start = index
    if entries:
        spans.append((start, len(entries)))
    return spans


def newest_groups(
    entries: Sequence[HistoryEntry], ceiling: int
) -> tuple[list[HistoryEntry], list[HistoryEntry]]:
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


def caller_skeleton(
    counter: TokenCounter, messages: Sequence[Message], ceiling: int
) -> tuple[list[HistoryItem], HistoryAggregate]:
    """Size call-site messages the way `thread_skeleton` sizes a Thread path.

    Call-site messages carry no stored groups, so groups are inferred as turns: every user
    or system message opens a group and the assistant replies, tool calls and tool results
    after it join it. A recent suffix therefore never separates a question from its answer
    or a tool call from its result, and the leading system prefix is listed always.
    """
    counts = content_tokens(counter, messages)
    items: list[HistoryItem] = []
    group = ""
    for index, (message, tokens) in enumerate(zip(messages, counts, strict=True)):
        if not group or message.role in ("user", "system"):
            group = f"caller:{index}"
        items.append(
            HistoryItem(
                id=message.id or f"caller:{index}",
                role=message.role,
                group_id=group,
                tokens=tokens,
                tool_call_ids=tuple(c.tool_call_id for c in message.tool_calls),
                tool_call_id=message.tool_call_id,
            )
        )
    prefix = leading_system_prefix(items)
    total = sum(item.tokens for item in items[:prefix])
    cut = len(items)
    for index in range(len(items) - 1, prefix - 1, -1):
        total += items[index].tokens
        if total > ceiling:
            break
        # Cut only at a group start, so the suffix never splits a group.
        if index == prefix or items[index - 1].group_id != items[index].group_id:
            cut = index
    older = items[prefix:cut]
    return [*items[:prefix], *items[cut:]], HistoryAggregate(
        count=len(older),
        tokens=sum(i.tokens for i in older),
        first_id=older[0].id if older else None,
        last_id=older[-1].id if older else None,
        prefix_items=prefix if older else 0,
    )
