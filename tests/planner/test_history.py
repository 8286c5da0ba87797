"""History projection over `HistoryItem`s: exact, recent, transcript validation."""

from __future__ import annotations

import pytest

from planner import (
    ConfigurationError,
    HistoryAggregate,
    HistoryItem,
    RecentHistory,
    RequestCompositionError,
    history,
    plan,
)
from tests.planner.helpers import request, tool_round, turns


def sizes(*group_sizes: int) -> tuple[HistoryItem, ...]:
    """Groups of the given message counts (user first, then assistants), 10 tokens each."""
    items: list[HistoryItem] = []
    for g, size in enumerate(group_sizes):
        for m in range(size):
            role = "user" if m == 0 else "assistant"
            items.append(HistoryItem(id=f"g{g}m{m}", role=role, group_id=f"g{g}", tokens=10))
    return tuple(items)


def codes(sealed: object) -> list[str]:
    return [w.code for w in sealed.receipt.warnings]  # type: ignore[attr-defined]


def test_recent_default_caps_at_twenty_messages() -> None:
    """97: `history.recent()` with no argument caps at 20 messages."""
    assert history.recent() == RecentHistory(messages=20)
    sealed = plan(request(history=turns(30), history_policy=history.recent()))
    assert len(sealed.message_ids) == 20
    assert sealed.message_ids[0] == "u20"


@pytest.mark.parametrize(
    "call",
    [
        lambda: history.recent(0),
        lambda: history.recent(-1),
        lambda: history.recent(2.5),  # type: ignore[arg-type]
        lambda: history.recent(messages=True),
        lambda: history.recent(tokens=0),
        lambda: history.recent(3, messages=4),
        lambda: RecentHistory(),
        lambda: history(recent={}),
        lambda: history(recent={"turns": 3}),
        lambda: history(on_miss="maybe"),  # type: ignore[arg-type]
    ],
)
def test_invalid_recent_caps_are_type_errors(call: object) -> None:
    """98/106: zero, negative, fractional or empty caps and bad miss policies raise TypeError."""
    with pytest.raises(TypeError) as raised:
        call()  # type: ignore[operator]
    assert isinstance(raised.value, ConfigurationError)


def test_recent_never_splits_a_group() -> None:
    """99: cap 3 over newest groups of 2 and 2 keeps only the newest, with a warning."""
    sealed = plan(request(history=sizes(2, 2), history_policy=history.recent(3)))
    assert sealed.message_ids == ("g1m0", "g1m1")
    assert codes(sealed) == ["HISTORY_CAUSAL_BOUNDARY"]


def test_newest_group_is_kept_even_above_a_cap() -> None:
    """100: an oversize newest group is kept whole with `HISTORY_CAP_OVERFLOW`."""
    sealed = plan(request(history=sizes(2, 5), history_policy=history.recent(3)))
    assert sealed.message_ids == tuple(f"g1m{m}" for m in range(5))
    assert codes(sealed) == ["HISTORY_CAP_OVERFLOW"]


def test_both_caps_stop_at_whichever_is_hit_first() -> None:
    """101: the suffix satisfies both caps."""
    by_tokens = plan(
        request(history=turns(10), history_policy=history.recent(messages=8, tokens=40))
    )
    assert len(by_tokens.message_ids) == 4
    by_messages = plan(
        request(history=turns(10), history_policy=history.recent(messages=4, tokens=1_000))
    )
    assert len(by_messages.message_ids) == 4
    assert codes(by_messages) == []


def test_leading_system_prefix_stays_outside_the_caps() -> None:
    """102: the leading system prefix is kept; a later system message is an ordinary group."""
    items = (
        HistoryItem(id="s0", role="system", group_id="sys", tokens=50),
        HistoryItem(id="s1", role="system", group_id="sys", tokens=50),
        *turns(3),
        HistoryItem(id="s2", role="system", group_id="late", tokens=5),
        HistoryItem(id="u9", role="user", group_id="late", tokens=5),
    )
    sealed = plan(request(history=items, history_policy=history.recent(messages=2)))
    assert sealed.message_ids == ("s0", "s1", "s2", "u9")
    assert sealed.inspection.history.leading_prefix == 2


def test_current_turn_is_not_counted_toward_caps() -> None:
    """103: the current turn is outside history and its caps."""
    sealed = plan(
        request(history=turns(5), history_policy=history.recent(2), current_turn_tokens=500)
    )
    assert sealed.message_ids == ("u4", "a4")
    assert sealed.input_tokens == 520


def test_recent_keeps_tool_rounds_whole() -> None:
    items = tool_round("g0", "c0") + tool_round("g1", "c1")
    sealed = plan(request(history=items, history_policy=history.recent(messages=2)))
    assert sealed.message_ids == ("g1-u", "g1-c", "g1-r", "g1-f")
    assert not sealed.message_ids[0].endswith("-r")


def test_recent_takes_the_older_aggregate_only_whole() -> None:
    older = HistoryAggregate(count=6, tokens=60, first_id="o0", last_id="o5")
    whole = plan(request(history=turns(2), older_history=older, history_policy=history.recent(20)))
    assert whole.included_older == older
    assert whole.input_tokens == 100
    partial = plan(request(history=turns(2), older_history=older, history_policy=history.recent(8)))
    assert partial.included_older is None
    assert codes(partial) == ["HISTORY_CAUSAL_BOUNDARY"]


@pytest.mark.parametrize(
    "items",
    [
        (HistoryItem(id="t", role="tool", group_id="g", tokens=1, tool_call_id="x"),),
        (HistoryItem(id="a", role="assistant", group_id="g", tokens=1, tool_call_ids=("x",)),),
        (
            HistoryItem(id="a", role="assistant", group_id="g", tokens=1, tool_call_ids=("x",)),
            HistoryItem(id="u", role="user", group_id="g", tokens=1),
        ),
        (
            HistoryItem(id="a", role="assistant", group_id="g", tokens=1, tool_call_ids=("x",)),
            HistoryItem(id="t", role="tool", group_id="h", tokens=1, tool_call_id="x"),
        ),
        (
            HistoryItem(id="a", role="assistant", group_id="g", tokens=1, tool_call_ids=("x", "x")),
            HistoryItem(id="t", role="tool", group_id="g", tokens=1, tool_call_id="x"),
        ),
        (
            HistoryItem(id="u", role="user", group_id="g", tokens=1, tool_call_ids=("x",)),
            HistoryItem(id="t", role="tool", group_id="g", tokens=1, tool_call_id="x"),
        ),
        (HistoryItem(id="u", role="user", group_id="g", tokens=1, tool_call_id="x"),),
        (
            HistoryItem(id="u1", role="user", group_id="g", tokens=1),
            HistoryItem(id="u2", role="user", group_id="h", tokens=1),
            HistoryItem(id="u3", role="user", group_id="g", tokens=1),
        ),
    ],
    ids=[
        "result-without-call",
        "ends-pending",
        "user-while-pending",
        "call-split-from-result",
        "reused-id",
        "user-makes-calls",
        "user-answers",
        "group-not-contiguous",
    ],
)
def test_malformed_transcripts_are_invalid_compositions(items: tuple[HistoryItem, ...]) -> None:
    """104: malformed tool lifecycles fail `INVALID_COMPOSITION` / `INVALID_HISTORY_TRANSCRIPT`."""
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(history=items))
    assert raised.value.code == "INVALID_COMPOSITION"
    assert raised.value.diagnostics["items"][0]["code"] == "INVALID_HISTORY_TRANSCRIPT"  # type: ignore[index]


def test_parallel_calls_may_be_answered_in_any_order_and_ids_reused_later() -> None:
    items = (
        HistoryItem(id="u", role="user", group_id="g", tokens=1),
        HistoryItem(id="a", role="assistant", group_id="g", tokens=1, tool_call_ids=("x", "y")),
        HistoryItem(id="ty", role="tool", group_id="g", tokens=1, tool_call_id="y"),
        HistoryItem(id="tx", role="tool", group_id="g", tokens=1, tool_call_id="x"),
        HistoryItem(id="a2", role="assistant", group_id="g", tokens=1, tool_call_ids=("x",)),
        HistoryItem(id="tx2", role="tool", group_id="g", tokens=1, tool_call_id="x"),
    )
    assert len(plan(request(history=items)).message_ids) == 6


def test_structure_overhead_is_counted_per_message_and_tool_call() -> None:
    from planner import MessageFormat

    fmt = MessageFormat(
        per_message=3, per_tool_call=7, per_tool_result=5, tools_preamble=0, reply_priming=2
    )
    sealed = plan(request(history=tool_round("g", "c"), message_format=fmt))
    assert sealed.input_tokens == 40 + 4 * 3 + 7 + 5 + 2


def test_projection_never_mutates_the_request() -> None:
    req = request(history=turns(5), history_policy=history.recent(2))
    before = req.model_dump_json()
    plan(req)
    assert req.model_dump_json() == before
