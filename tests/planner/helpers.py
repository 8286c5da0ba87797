"""Small builders shared by the planner tests (plain functions, no fixtures)."""

from __future__ import annotations

from typing import Any

from planner import (
    HistoryItem,
    MessageFormat,
    ModelProfile,
    PlanRequest,
)

ZERO_FORMAT = MessageFormat(
    per_message=0, per_tool_call=0, per_tool_result=0, tools_preamble=0, reply_priming=0
)
"""No framing at all, so test arithmetic is just the sum of the declared tokens."""

EXACT = ModelProfile(
    id="test:exact",
    provider="test",
    context_window=10_000,
    default_output_reserve=1_000,
    confidence="exact",
    encoding="cl100k_base",
)
"""Window 10,000, reserve 1,000, margin 0: strict max = 10,000 - 1,000 - 32 = 8,968."""

EXACT_MAX = 8_968


def request(**fields: Any) -> PlanRequest:
    """A request on the `EXACT` profile with zero framing unless overridden."""
    fields.setdefault("request_id", "req-1")
    fields.setdefault("model", EXACT)
    fields.setdefault("message_format", ZERO_FORMAT)
    return PlanRequest(**fields)


def turns(count: int, tokens: int = 10, *, prefix: str = "") -> tuple[HistoryItem, ...]:
    """`count` causal groups of (user, assistant), each message `tokens` tokens."""
    items: list[HistoryItem] = []
    for g in range(count):
        items.append(
            HistoryItem(id=f"{prefix}u{g}", role="user", group_id=f"{prefix}g{g}", tokens=tokens)
        )
        items.append(
            HistoryItem(
                id=f"{prefix}a{g}", role="assistant", group_id=f"{prefix}g{g}", tokens=tokens
            )
        )
    return tuple(items)


def tool_round(group: str, call: str, tokens: int = 10) -> tuple[HistoryItem, ...]:
    """One causal group: user, assistant tool call, tool result, final assistant."""
    return (
        HistoryItem(id=f"{group}-u", role="user", group_id=group, tokens=tokens),
        HistoryItem(
            id=f"{group}-c",
            role="assistant",
            group_id=group,
            tokens=tokens,
            tool_call_ids=(call,),
        ),
        HistoryItem(id=f"{group}-r", role="tool", group_id=group, tokens=tokens, tool_call_id=call),
        HistoryItem(id=f"{group}-f", role="assistant", group_id=group, tokens=tokens),
    )
