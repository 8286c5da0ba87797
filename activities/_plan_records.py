"""Recording a sealed plan's receipt and inspection, with the support calls of its summary.

A summary's support calls (the provider calls that wrote it) are part of the story of every
request that sends it. Their number grows with the prefix it covers (a hierarchical summary
of a long Thread makes one call per chunk), so the summary travels through workflow payloads
as its id and size alone and its support calls are linked here, from the stored artifact,
when the inspection is recorded: Temporal history stays flat at every Thread length.
"""

from __future__ import annotations

from activities._inputs import scoped_key
from contracts.activities import RecordPlanInput
from planner import ArtifactRecord, RequestInspection, SupportRequestRecord, with_runtime_facts
from storage import ReceiptStore, SummaryScope, SummaryStore


class PlanRecorder:
    """Stores sealed plans' receipts and inspections once.

    Args:
        receipts: Request receipts and inspections.
        summaries: Summary artifacts, whose support calls an inspection links.
    """

    def __init__(self, receipts: ReceiptStore, summaries: SummaryStore) -> None:
        self._receipts = receipts
        self._summaries = summaries

    async def record(self, request: RecordPlanInput) -> None:
        """Store `request`'s receipt and inspection (a repeated call writes nothing).

        Args:
            request: The sealed plan's evidence.
        """
        inspection = await self.with_summary_support(request.inspection, request.thread_id)
        await self._receipts.record(
            request.receipt.id,
            generation_key=scoped_key(request),
            thread_id=request.thread_id,
            receipt=request.receipt.model_dump(mode="json"),
            inspection=inspection.model_dump(mode="json"),
            replace=request.replace,
        )

    async def with_summary_support(
        self, inspection: RequestInspection, thread_id: str | None
    ) -> RequestInspection:
        """`inspection` with the support calls of the summaries it sends linked.

        A summary already naming its support calls (planned in process from a complete
        artifact) and one erased since it was planned are left as they are.

        Args:
            inspection: The sealed plan's inspection.
            thread_id: The generation's Thread (`None` ad hoc), which scopes its summaries.

        Returns:
            The inspection, linked; the input is unchanged.
        """
        artifacts = list(inspection.artifacts)
        support: list[SupportRequestRecord] = []
        for index, artifact in enumerate(artifacts):
            if not _unlinked_summary(artifact):
                continue
            assert artifact.artifact_id is not None
            scope = SummaryScope.holding(artifact.artifact_id, thread_id)
            stored = await self._summaries.get(scope, artifact.artifact_id)
            if stored is None:
                continue
            artifacts[index] = artifact.model_copy(
                update={"support_request_ids": tuple(stored.support_request_ids)}
            )
            support.extend(
                SupportRequestRecord.model_validate(record) for record in stored.support_requests
            )
        if not support:
            return inspection
        linked = inspection.model_copy(update={"artifacts": tuple(artifacts)})
        return with_runtime_facts(
            linked, retry_count=inspection.retry_count, support_requests=tuple(support)
        )


def _unlinked_summary(artifact: ArtifactRecord) -> bool:
    return (
        artifact.kind == "summary"
        and bool(artifact.artifact_id)
        and not artifact.support_request_ids
    )
