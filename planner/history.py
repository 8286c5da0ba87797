"""History items as the planner sees them, history policies, and exact/recent projection.

The planner never sees message text: a history source arrives as `HistoryItem`s (id, role,
causal group, tool-call links, content tokens) for the newest groups plus one
`HistoryAggregate` for everything older. Projection selects ids; it never mutates, reorders
or rewrites canonical messages.

Policies:

- `ExactHistory` (the default): every message is required. If the whole history cannot fit,
  the request fails with `REQUEST_TOO_LARGE`; there is never an implicit window.
- `RecentHistory` (`history.recent(...)`): the newest exact suffix at causal-group
  boundaries, capped softly by messages and/or tokens.
- `ManagedHistory` (`history(...)`): older turns may be replaced by a derived summary; see
  `planner.summary_choice`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from pydantic import Field

from planner._base import FrozenModel
from vocabulary.errors import RequestCompositionError

Role = Literal["system", "user", "assistant", "tool"]


class HistoryItem(FrozenModel):
    """One canonical message, content-free.

    Attributes:
        id: Message id.
        role: `system`, `user`, `assistant` or `tool`.
        group_id: Causal group (a stored Thread group is authoritative); a group is never
            split by projection.
        tokens: Content tokens (text, tool-call arguments, tool-result text, media estimate)
            counted once with the model's encoding; structure overhead is added by the planner.
        tool_call_ids: Ids of the tool calls an assistant message makes.
        tool_call_id: For a `tool` message, the call it answers.
    """

    id: str = Field(min_length=1)
    role: Role
    group_id: str = Field(min_length=1)
    tokens: int = Field(ge=0)
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None


class HistoryAggregate(FrozenModel):
    """Everything older than the listed history items, summarised as one figure.

    Attributes:
        count: Number of older messages.
        tokens: Their content tokens.
        first_id: Oldest message id of the range.
        last_id: Newest message id of the range.
        groups: Causal groups they form; `0` when not stated (counted as one group).
        calls: Tool calls they make (each with its result in the range, so each adds one
            call's and one result's framing when the aggregate is sent).
    """

    count: int = Field(default=0, ge=0)
    tokens: int = Field(default=0, ge=0)
    groups: int = Field(default=0, ge=0)
    calls: int = Field(default=0, ge=0)
    first_id: str | None = None
    last_id: str | None = None
    prefix_items: int = Field(default=0, ge=0)
    """Listed items before the aggregate: the transcript's leading system prefix.

    A reader always lists the leading system prefix, even when the groups after it are
    aggregated, so no cap and no summary can drop it; the aggregate lies between it and
    the remaining listed items.
    """


class _Roled(Protocol):
    @property
    def role(self) -> str: ...

    @property
    def group_id(self) -> str: ...


class TranscriptEntry(_Roled, Protocol):
    """What the validating scan reads of a message (a `HistoryItem` or a stored entry)."""

    @property
    def tokens(self) -> int | None:
        """Content tokens (`None` counts as zero)."""
        ...

    @property
    def tool_call_ids(self) -> Sequence[str]:
        """Tool calls the message makes."""
        ...

    @property
    def tool_call_id(self) -> str | None:
        """The call a tool result answers."""
        ...


TranscriptDefect = Literal[
    "a tool call is separated from its result",
    "a causal group is not contiguous",
    "a tool result has no pending call",
    "a message arrived while tool calls were pending",
    "only tool messages answer tool calls",
    "only assistant messages make tool calls",
    "a tool call id is reused",
    "the transcript ends with pending tool calls",
    "the listed system prefix is not a system prefix",
]
"""Every way a transcript can be malformed: fixed, content-free sentences."""

TRANSCRIPT_DEFECTS: frozenset[str] = frozenset(get_args(TranscriptDefect))


class TranscriptDefectError(Exception):
    """A malformed transcript found by `scan_transcript` (internal; see `scan_history`)."""

    def __init__(self, defect: TranscriptDefect) -> None:
        super().__init__(defect)
        self.defect: TranscriptDefect = defect


def leading_system_prefix(messages: Sequence[_Roled]) -> int:
    """Messages in the leading groups made only of `system` messages.

    The leading system prefix is kept outside every cap and never summarised; a group that
    mixes a system message with conversation is conversation. Readers, the planner and the
    summary preparer all use this one definition, so their positions line up.

    Args:
        messages: A transcript, oldest first (anything with `role` and `group_id`).

    Returns:
        The prefix length in messages (a group boundary).
    """
    end = 0
    index = 0
    count = len(messages)
    while index < count:
        group = messages[index].group_id
        stop = index
        while stop < count and messages[stop].group_id == group:
            if messages[stop].role != "system":
                return end
            stop += 1
        end = index = stop
    return end


class HistoryWarning(FrozenModel):
    """A content-free note about how history was projected.

    Attributes:
        code: Warning code, e.g. `HISTORY_CAUSAL_BOUNDARY`.
        message: Human-readable, content-free explanation.
    """

    code: str
    message: str


def invalid_transcript(message: str, request_id: str | None) -> RequestCompositionError:
    """Build the `INVALID_COMPOSITION` error for a malformed history transcript."""
    return RequestCompositionError(
        "INVALID_COMPOSITION",
        message,
        request_id=request_id,
        diagnostics={
            "items": [
                {
                    "id": f"{request_id}:history-transcript",
                    "code": "INVALID_HISTORY_TRANSCRIPT",
                    "contributor": "history",
                    "tokens": None,
                    "message": message,
                }
            ]
        },
    )


@dataclass(frozen=True, slots=True)
class HistoryScan:
    """What one validating pass over the history items found (internal).

    Attributes:
        group_starts: Index of the first item of every causal group, oldest first, followed
            by the item count (so group `g` spans `group_starts[g]:group_starts[g + 1]`).
        tokens_before: Content tokens of all items before each entry of `group_starts`.
        calls_before: Tool calls made before each entry of `group_starts`. A group never
            ends with calls pending, so as many tool results precede each boundary.
        prefix_groups: Number of leading groups made only of `system` messages (the leading
            prefix, kept outside recent caps). When older history is aggregated, the prefix
            is the aggregate's `prefix_items` (the reader lists it before the aggregate).
    """

    group_starts: tuple[int, ...]
    tokens_before: tuple[int, ...]
    calls_before: tuple[int, ...]
    prefix_groups: int

    @property
    def group_count(self) -> int:
        """Number of listed causal groups."""
        return len(self.group_starts) - 1


def scan_history(
    items: Sequence[TranscriptEntry],
    *,
    has_older: bool,
    request_id: str | None,
    prefix_items: int = 0,
) -> HistoryScan:
    """Validate the tool lifecycle and causal grouping of `items` in one pass.

    Rules (violations raise `INVALID_COMPOSITION` with `INVALID_HISTORY_TRANSCRIPT`): groups
    are contiguous; only assistants make tool calls and only tool messages answer them; a
    tool result answers a call pending in its own group; no user, system or assistant
    message arrives while calls are pending; a group never ends with calls pending (so a
    call and its result are never separated); call ids are not reused while pending.

    Args:
        items: History items, oldest first.
        has_older: Whether an aggregate of older messages precedes `items` (after their
            first `prefix_items`).
        request_id: For error attribution.
        prefix_items: With older history, how many listed items form the leading system
            prefix before the aggregate.

    Returns:
        Group boundaries with token and tool-call sums at each boundary.
    """
    try:
        return scan_transcript(items, has_older=has_older, prefix_items=prefix_items)
    except TranscriptDefectError as error:
        raise invalid_transcript(error.defect, request_id) from None


def scan_transcript(
    items: Sequence[TranscriptEntry], *, has_older: bool, prefix_items: int = 0
) -> HistoryScan:
    """`scan_history` without error attribution: raises `TranscriptDefectError`.

    The loop is the only per-message work of planning, so it keeps to plain local
    variables: everything later is computed per group from the boundary sums it records.
    A reader runs it once when it packs `HistoryColumns`; the planner then works on the
    packed group sums alone.
    """
    starts: list[int] = []
    tokens_before: list[int] = []
    calls_before: list[int] = []
    seen: set[str] = set()
    pending: set[str] = set()
    current: str | None = None
    total = calls = index = 0
    for item in items:
        group = item.group_id
        if group != current:
            if pending:
                raise TranscriptDefectError("a tool call is separated from its result")
            if group in seen:
                raise TranscriptDefectError("a causal group is not contiguous")
            seen.add(group)
            starts.append(index)
            tokens_before.append(total)
            calls_before.append(calls)
            current = group
        index += 1
        total += item.tokens or 0
        if item.role == "tool":
            answer = item.tool_call_id
            if answer is None or answer not in pending:
                raise TranscriptDefectError("a tool result has no pending call")
            pending.discard(answer)
            continue
        if pending:
            raise TranscriptDefectError("a message arrived while tool calls were pending")
        if item.tool_call_id is not None:
            raise TranscriptDefectError("only tool messages answer tool calls")
        made = item.tool_call_ids
        if made:
            if item.role != "assistant":
                raise TranscriptDefectError("only assistant messages make tool calls")
            for call in made:
                if call in pending:
                    raise TranscriptDefectError("a tool call id is reused")
                pending.add(call)
            calls += len(made)
    if pending:
        raise TranscriptDefectError("the transcript ends with pending tool calls")
    starts.append(index)
    tokens_before.append(total)
    calls_before.append(calls)
    prefix_end = leading_system_prefix(items)
    if has_older:
        # The transcript's start is known only through the reader's statement.
        if prefix_items > prefix_end:
            raise TranscriptDefectError("the listed system prefix is not a system prefix")
        prefix_end = prefix_items
    return HistoryScan(
        group_starts=tuple(starts),
        tokens_before=tuple(tokens_before),
        calls_before=tuple(calls_before),
        prefix_groups=prefix_group_count(starts, prefix_end),
    )


def prefix_group_count(starts: Sequence[int], prefix_end: int) -> int:
    """Groups that end at or before `prefix_end` (`starts` ends with the item count)."""
    groups = 0
    while groups < len(starts) - 1 and starts[groups + 1] <= prefix_end:
        groups += 1
    return groups
