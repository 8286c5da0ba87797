"""Call-site skeletons: inferred turns keep questions with answers and the system prefix."""

from __future__ import annotations

import pytest

from activities.skeleton import caller_skeleton, ids_at_positions
from crux.errors import ThreadError
from crux.messages import Message, ToolCallPart
from planner import HistoryAggregate
from planner.columns import unpack_ints
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
    columns, older = caller_skeleton(_counter(), messages, ceiling=10_000)
    assert older == HistoryAggregate()
    assert columns.defect is None
    assert list(unpack_ints(columns.groups)) == [1, 4, 2]
    assert list(unpack_ints(columns.calls)) == [0, 1, 0]
    assert columns.prefix_groups == 1


def test_a_tight_ceiling_aggregates_middle_turns_but_lists_the_system_prefix() -> None:
    messages = [Message(role="system", content="Be brief.")]
    for turn in range(20):
        messages.append(Message(role="user", content=f"question number {turn} " * 5))
        messages.append(Message(role="assistant", content=f"answer number {turn} " * 5))
    columns, older = caller_skeleton(_counter(), messages, ceiling=100)
    sizes = list(unpack_ints(columns.groups))
    assert columns.prefix_groups == 1 and sizes[0] == 1
    assert older.count > 0 and older.prefix_items == 1
    assert set(sizes[1:]) == {2}
    assert older.count + sum(sizes) == len(messages)
    assert older.first_id is None and older.last_id is None
    # The aggregate states the causal groups it stands for, so receipt figures count them.
    assert older.groups == older.count // 2
    assert older.calls == 0


def test_an_aggregated_tool_round_brings_its_calls() -> None:
    messages: list[Message] = []
    for turn in range(6):
        messages.append(Message(role="user", content=f"question number {turn} " * 5))
        messages.append(
            Message(
                role="assistant",
                content=[ToolCallPart(tool_call_id=f"c{turn}", tool_name="weather", input={})],
            )
        )
        messages.append(Message(role="tool", content="sunny " * 5, tool_call_id=f"c{turn}"))
        messages.append(Message(role="assistant", content=f"answer number {turn} " * 5))
    columns, older = caller_skeleton(_counter(), messages, ceiling=60)
    assert older.count > 0
    assert older.groups == older.count // 4
    assert older.calls == older.groups
    assert older.calls + sum(unpack_ints(columns.calls)) == 6


def test_positions_map_back_to_ids_and_refuse_ranges_off_the_path() -> None:
    ids = ["a", "b", "c", "d"]
    assert ids_at_positions(ids, [(0, 1), (2, 4)]) == ["a", "c", "d"]
    assert ids_at_positions(ids, []) == []
    for bad in ([(3, 5)], [(-1, 1)], [(2, 1)]):
        with pytest.raises(ThreadError) as raised:
            ids_at_positions(ids, bad)
        assert raised.value.code == "identity_conflict"
