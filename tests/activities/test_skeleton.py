"""Call-site skeletons: inferred turns keep questions with answers and the system prefix."""

from __future__ import annotations

from activities.skeleton import caller_skeleton
from crux.messages import Message, ToolCallPart
from planner import HistoryAggregate
from providers import TokenCounter


def _counter() -> TokenCounter:
    return TokenCounter.for_encoding("o200k_base")


def test_call_site_turns_group_questions_with_answers_and_tool_rounds() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather?"),
        Message(
            role="assistant",
            content=[ToolCallPart(tool_call_id="c1", tool_name="weather", input={})],
        ),
        Message(role="tool", content="sunny", tool_call_id="c1"),
        Message(role="assistant", content="Sunny."),
        Message(role="user", content="Thanks"),
        Message(role="assistant", content="Welcome"),
    ]
    items, older = caller_skeleton(_counter(), messages, ceiling=10_000)
    assert older == HistoryAggregate()
    groups = [item.group_id for item in items]
    assert groups == ["caller:0", *["caller:1"] * 4, "caller:5", "caller:5"]


def test_a_tight_ceiling_aggregates_middle_turns_but_lists_the_system_prefix() -> None:
    messages = [Message(role="system", content="Be brief.")]
    for turn in range(20):
        messages.append(Message(role="user", content=f"question number {turn} " * 5))
        messages.append(Message(role="assistant", content=f"answer number {turn} " * 5))
    items, older = caller_skeleton(_counter(), messages, ceiling=100)
    assert items[0].role == "system"
    assert older.count > 0 and older.prefix_items == 1
    assert items[1].role == "user"
    assert older.count + len(items) == len(messages)
