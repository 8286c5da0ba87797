"""A recorded inspection links the support calls of the summary its plan sends.

The summary crosses workflow payloads by its id and size alone; the recorder finds its
support calls on the stored artifact, so the stored inspection tells the whole story.
"""

from __future__ import annotations

import uuid

import asyncpg

from activities._plan_records import PlanRecorder
from contracts.activities import RecordPlanInput
from planner import HistoryItem, HistorySummary, InputBudget, ManagedHistory, plan
from storage import ReceiptStore, SummaryArtifact, SummaryScope, SummaryStore, ThreadStore
from tests.planner.helpers import request, turns
from vocabulary.messages import Message

SUPPORT = [
    {
        "id": f"support_{n}",
        "model": "openai:gpt-4o-mini",
        "input_tokens": 900 + n,
        "max_input_tokens": 1_000,
        "measurement": "estimated",
    }
    for n in range(3)
]


def _record(thread_id: str, artifact_id: str, request_id: str) -> RecordPlanInput:
    """A plan of a managed request that sends the summary `artifact_id` (ids only)."""
    summary = HistorySummary(artifact_id=artifact_id, tokens=30, covers=16)
    sealed = plan(
        request(
            request_id=request_id,
            history=(HistoryItem(id="s0", role="system", group_id="sys", tokens=20), *turns(10)),
            history_policy=ManagedHistory(recent_messages=4, summary=summary),
            input_budget=InputBudget(max=150),
        )
    )
    assert sealed.inspection.artifacts[0].support_request_ids == ()
    return RecordPlanInput(
        generation_id="g", thread_id=thread_id, receipt=sealed.receipt, inspection=sealed.inspection
    )


async def test_the_stored_inspection_links_the_summarys_support_calls(pool: asyncpg.Pool) -> None:
    thread_id = f"records:{uuid.uuid4().hex[:6]}"
    await ThreadStore(pool).append(thread_id, [Message(id="m1", role="user", content="hi")])
    scope = SummaryScope.thread(thread_id)
    artifact_id = scope.artifact_id("m1", "adaptive", "openai:gpt-4o-mini")
    await SummaryStore(pool).put(
        scope,
        SummaryArtifact(
            artifact_id=artifact_id,
            through_id="m1",
            covers=1,
            tokens=30,
            strategy="adaptive",
            model="openai:gpt-4o-mini",
            text="Earlier: greetings.",
            support_request_ids=[record["id"] for record in SUPPORT],
            support_requests=SUPPORT,
        ),
        ["m1"],
    )
    receipts = ReceiptStore(pool)
    recorder = PlanRecorder(receipts, SummaryStore(pool))
    linked, erased = f"request_{uuid.uuid4().hex}", f"request_{uuid.uuid4().hex}"
    await recorder.record(_record(thread_id, artifact_id, linked))
    # A summary erased since it was planned (its sources redacted) links nothing.
    await recorder.record(_record(thread_id, f"{artifact_id}0", erased))
    stored = await receipts.load([linked, erased])

    inspection = stored[linked].inspection
    assert inspection is not None
    ids = [record["id"] for record in SUPPORT]
    assert inspection["artifacts"][0]["support_request_ids"] == ids
    assert [record["id"] for record in inspection["support_requests"]] == ids
    assert set(ids) <= set(inspection["linked_request_ids"])

    untouched = stored[erased].inspection
    assert untouched is not None
    assert untouched["artifacts"][0]["support_request_ids"] == []
    assert untouched["support_requests"] == []
