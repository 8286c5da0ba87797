"""Activity payloads: the packed skeleton round-trips through JSON and costs a few bytes per
message; a commit's result carries only what its input does not say."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given

from contracts.activities import (
    CommitTurnInput,
    CommitTurnResult,
    InvokeModelResult,
    ReadRequestResult,
)
from contracts.generation import GenerationInput, GenerationOutcome, StepFigures, Usage
from planner import HistoryAggregate, HistoryColumns, HistoryItem, PlanRequest, plan
from planner.history import scan_history
from tests.planner.helpers import request
from tests.planner.test_properties import transcripts
from vocabulary.commits import ThreadCommit
from workflows._inputs import commit_input, pending_commit
from workflows._progress import TurnProgress


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


def _commit_input(**changes: object) -> CommitTurnInput:
    return CommitTurnInput.model_validate(
        {
            "generation_id": "g1",
            "workflow_id": "crux/gen/t1/g1",
            "thread_id": "t1",
            "accepted_attempt": 2,
            "history_source": "thread",
            "steps": [
                StepFigures(
                    attempt=1,
                    request_id="r1",
                    usage=Usage(input_tokens=5, output_tokens=2),
                    finish_reason="tool_calls",
                ),
                StepFigures(
                    attempt=2,
                    request_id="r2",
                    usage=Usage(input_tokens=9, output_tokens=4),
                    finish_reason="stop",
                ),
            ],
            **changes,
        }
    )


def _outcome(**changes: object) -> GenerationOutcome:
    return GenerationOutcome.model_validate(
        {
            "generation_id": "g1",
            "thread_id": "t1",
            "output_message_id": "gen:g1:assistant",
            "thread_commit": ThreadCommit(
                status="selected",
                message_ids=("gen:g1:user", "gen:g1:assistant"),
                selected_head="gen:g1:assistant",
                committed_at=datetime(2026, 1, 2, tzinfo=UTC),
            ),
            "request_ids": ("r1", "r2"),
            "usage": Usage(input_tokens=14, output_tokens=6),
            "history_source": "thread",
            **changes,
        }
    )


def test_a_first_commit_result_carries_only_its_commit_receipt() -> None:
    request = _commit_input()
    outcome = _outcome()
    result = CommitTurnResult.of(outcome, request)
    assert set(result.delta) == {"thread_commit"}
    decoded = CommitTurnResult.model_validate_json(result.model_dump_json())
    assert decoded.outcome(request) == outcome


@pytest.mark.parametrize(
    "changes",
    [
        {"replayed": True, "request_ids": ("r0",), "usage": Usage(input_tokens=1)},
        {"reply": "the answer"},
        {"thread_id": None, "thread_commit": None, "history_source": "none"},
        {"output_message_id": "gen:other:assistant"},
    ],
)
def test_what_the_input_does_not_imply_crosses_whole(changes: dict[str, object]) -> None:
    request = _commit_input()
    outcome = _outcome(**changes)
    result = CommitTurnResult.of(outcome, request)
    assert set(changes) <= set(result.delta)
    decoded = CommitTurnResult.model_validate_json(result.model_dump_json())
    assert decoded.outcome(request) == outcome


def test_a_commit_result_recorded_whole_is_read_as_it_was() -> None:
    outcome = _outcome(replayed=True)
    recorded = json.dumps({"result": outcome.model_dump(mode="json")})
    decoded = CommitTurnResult.model_validate_json(recorded)
    assert decoded.outcome(_commit_input(generation_id="elsewhere")) == outcome


def test_a_whole_commit_result_stands_for_its_outcome_whatever_the_input() -> None:
    outcome = _outcome(replayed=False, reply="the answer")
    result = CommitTurnResult.whole(outcome)
    decoded = CommitTurnResult.model_validate_json(result.model_dump_json())
    assert decoded.outcome(_commit_input(generation_id="elsewhere", steps=[])) == outcome


def test_the_pending_commit_completed_by_its_answer_is_the_workflows_commit() -> None:
    """What an attempt commits itself is exactly what the workflow would have committed."""
    request = GenerationInput.model_validate(
        {"generation_id": "g1", "thread_id": "t1", "model": "openai:gpt-4o", "input": "hi"}
    )
    read = ReadRequestResult(
        head="gen:g0:assistant", history_source="thread", current_turn_tokens=7, encoding="o200k"
    )
    progress = TurnProgress()
    progress.steps.append(
        StepFigures(attempt=1, request_id="r1", usage=Usage(input_tokens=5), finish_reason="x")
    )
    progress.add_turn_message(12)
    progress.attempt = 2
    pending = pending_commit(request, read, progress)
    answer = StepFigures(
        attempt=2,
        request_id="r2",
        usage=Usage(input_tokens=9, output_tokens=4),
        finish_reason="stop",
        output_tokens=4,
    )
    progress.steps.append(answer)
    assert pending.answered_by(answer) == commit_input(request, read, progress, progress.steps)


@pytest.mark.parametrize(
    ("changes", "ends"),
    [
        ({}, True),
        ({"tool_call_ids": ["c1"]}, False),
        ({"defects": ["$.x: missing"]}, False),
        ({"revision_moved": True}, False),
    ],
)
def test_only_a_clean_answer_without_tool_calls_ends_the_turn(
    changes: dict[str, object], ends: bool
) -> None:
    invoked = InvokeModelResult.model_validate(
        {"usage": {}, "finish_reason": "stop", "output_tokens": 1, **changes}
    )
    assert invoked.ends_the_turn is ends
