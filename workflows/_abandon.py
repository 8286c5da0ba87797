"""Discarding an abandoned run's staged turn, waiting out the outage it was abandoned in.

An operator usually abandons a run while storage is away (it sits in `commit_blocked`), so
the one-shot discard of the failure path would find the store unreachable and leave the
rows to the retention sweep. Here the discard is retried while storage is unavailable,
within the run's own `storage_wait_seconds`, so the staged turn is gone once the store is
back.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contracts.activities import (
    ACTIVITY_DISCARD_GENERATION,
    DiscardGenerationInput,
    DiscardGenerationResult,
)
from contracts.generation import GenerationInput
from vocabulary.stages import Stage
from workflows import _options
from workflows._stages import StageReporter
from workflows._storage_wait import is_storage_outage


async def discard_abandoned(stages: StageReporter, request: GenerationInput) -> None:
    """Remove what the abandoned run staged, retrying while storage is unavailable.

    Never raises: the run fails with its `abandoned` error either way, and anything left
    behind (storage stayed away past the ceiling) is removed by the retention sweep.
    """
    stages.set(Stage.FAILED, "abandoned: discarding staged content")
    stages.publish()
    arg = DiscardGenerationInput(generation_id=request.generation_id, thread_id=request.thread_id)
    config = _options.with_summary(_options.DISCARD_GENERATION, "discard abandoned staging")
    ceiling = timedelta(seconds=request.storage_wait_seconds)
    since = workflow.now()
    backoff = _options.STORAGE_BLOCKED_INITIAL_BACKOFF
    while True:
        try:
            await workflow.execute_activity(
                ACTIVITY_DISCARD_GENERATION, arg, result_type=DiscardGenerationResult, **config
            )
            return
        except ActivityError as error:
            if not is_storage_outage(error) or workflow.now() - since >= ceiling:
                return
        await workflow.sleep(backoff)
        backoff = min(backoff * 2, _options.STORAGE_BLOCKED_MAX_BACKOFF)
