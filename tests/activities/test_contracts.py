"""The packed skeleton round-trips through JSON and costs a few bytes per message."""

from __future__ import annotations

from hypothesis import given

from contracts.activities import ReadRequestResult
from planner import HistoryAggregate, HistoryColumns, HistoryItem, PlanRequest, plan
from planner.history import scan_history
from tests.planner.helpers import request
from tests.planner.test_properties import transcripts


@given(transcripts())
def test_the_skeleton_round_trips_through_json_to_the_same_group_sums(
    items: tuple[HistoryItem, ...],
) -> None:
    read = ReadRequestResult(history=HistoryColumns.pack(items))
    decoded = ReadRequestResult.model_validate_json(read.model_dump_json())
    expected = scan_history(items, has_older=False, request_id=None)
    assert decoded.history.scan(None, has_older=False, prefix_items=0) == expected


def test_a_long_thread_costs_under_three_bytes_per_message_and_no_ids() -> None:
    # A 128k-token window of 100-token messages in user/assistant pairs: about 1,300
    # messages listed, whatever the Thread's length.
    items = tuple(
        HistoryItem(
            id=f"gen:{n // 2}:{'user' if n % 2 == 0 else 'assistant'}",
            role="user" if n % 2 == 0 else "assistant",
            group_id=f"gen:{n // 2}:user",
            tokens=60 + n % 97,
        )
        for n in range(1_300)
    )
    read = ReadRequestResult(
        history=HistoryColumns.pack(items),
        older_history=HistoryAggregate(count=8_700, tokens=870_000),
    )
    payload = read.model_dump_json()
    assert len(payload) < 3 * len(items)
    assert "gen:" not in payload
    decoded = ReadRequestResult.model_validate_json(payload)
    sealed = plan(
        PlanRequest.model_validate(
            {
                **request().model_dump(),
                "history_columns": decoded.history,
                "older_history": decoded.older_history,
                "history_policy": {"kind": "recent", "messages": 10},
            }
        )
    )
    assert sealed.message_ranges == ((9_990, 10_000),)
