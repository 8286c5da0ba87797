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
  `planner.managed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from planner._base import FrozenModel
from planner.errors import RequestCompositionError

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
    """

    count: int = Field(default=0, ge=0)
    tokens: int = Field(default=0, ge=0)
    first_id: str | None = None
    last_id: str | None = None


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
        group_starts: Index of the first item of every causal group, oldest first.
        group_tokens: Content tokens of every group.
        prefix_groups: Number of leading groups made only of `system` messages (the leading
            prefix, kept outside recent caps). Zero when older history exists, because the
            transcript's true start then lies in the aggregate.
        group_calls: `(tool calls, tool results)` of every group (each adds framing).
        tool_calls: Total tool calls in assistant messages.
        tool_results: Total tool-result messages.
    """

    group_starts: tuple[int, ...]
    group_tokens: tuple[int, ...]
    group_calls: tuple[tuple[int, int], ...]
    prefix_groups: int
    tool_calls: int
    tool_results: int


def scan_history(
    items: tuple[HistoryItem, ...], *, has_older: bool, request_id: str | None
) -> HistoryScan:
    """Validate the tool lifecycle and causal grouping of `items` in one pass.

    Rules (violations raise `INVALID_COMPOSITION` with `INVALID_HISTORY_TRANSCRIPT`): groups
    are contiguous; only assistants make tool calls and only tool messages answer them; a
    tool result answers a call pending in its own group; no user, system or assistant
    message arrives while calls are pending; a group never ends with calls pending (so a
    call and its result are never separated); call ids are not reused while pending.

    Args:
        items: History items, oldest first.
        has_older: Whether an aggregate of older messages precedes `items`.
        request_id: For error attribution.

    Returns:
        Group boundaries, per-group tokens and tool counts.
    """
    starts: list[int] = []
    group_tokens: list[int] = []
    group_calls: list[tuple[int, int]] = []
    seen_groups: set[str] = set()
    pending: set[str] = set()
    current: str | None = None
    running = 0
    calls = results = calls_before = results_before = 0
    for index, item in enumerate(items):
        group = item.group_id
        if group != current:
            if pending:
                raise invalid_transcript("a tool call is separated from its result", request_id)
            if group in seen_groups:
                raise invalid_transcript("a causal group is not contiguous", request_id)
            seen_groups.add(group)
            if current is not None:
                group_tokens.append(running)
                group_calls.append((calls - calls_before, results - results_before))
            starts.append(index)
            current = group
            running = 0
            calls_before, results_before = calls, results
        running += item.tokens
        role = item.role
        if role == "tool":
            call = item.tool_call_id
            if not call or call not in pending:
                raise invalid_transcript("a tool result has no pending call", request_id)
            pending.discard(call)
            results += 1
            continue
        if pending:
            raise invalid_transcript("a message arrived while tool calls were pending", request_id)
        if item.tool_call_id is not None:
            raise invalid_transcript("only tool messages answer tool calls", request_id)
        if item.tool_call_ids:
            if role != "assistant":
                raise invalid_transcript("only assistant messages make tool calls", request_id)
            for call in item.tool_call_ids:
                if call in pending:
                    raise invalid_transcript("a tool call id is reused", request_id)
                pending.add(call)
            calls += len(item.tool_call_ids)
    if pending:
        raise invalid_transcript("the transcript ends with pending tool calls", request_id)
    if current is not None:
        group_tokens.append(running)
        group_calls.append((calls - calls_before, results - results_before))
    prefix_groups = 0
    if not has_older:
        bounds = [*starts, len(items)]
        for g in range(len(starts)):
            if all(items[i].role == "system" for i in range(bounds[g], bounds[g + 1])):
                prefix_groups += 1
            else:
                break
    return HistoryScan(
        group_starts=tuple(starts),
        group_tokens=tuple(group_tokens),
        group_calls=tuple(group_calls),
        prefix_groups=prefix_groups,
        tool_calls=calls,
        tool_results=results,
    )
