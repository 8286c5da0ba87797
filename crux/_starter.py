"""Starting a generation workflow: ids only, labelled for the Temporal UI.

A start attaches to a run already going under the same workflow id (the id derives from the
generation id), so starting twice runs once. Search attributes and the static summary are
ids, model names and counts: never content.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

from contracts.generation import GenerationInput
from contracts.search import GENERATION_ID, MODEL, STAGE, THREAD_ID
from contracts.ui import generation_details, generation_summary
from crux._outcomes import Finished
from crux._waiting import execution_timeout
from vocabulary.ids import workflow_id_for

WORKFLOW_NAME = "ManagedGenerationWorkflow"

CLOSING_SECONDS = 5.0
"""How long a repeated generation waits for the run that committed it to close."""


class GenerationStarter:
    """Starts (or attaches to) the workflow of a generation.

    Args:
        client: A Temporal client using the pydantic data converter.
        task_queue: The Crux worker's task queue.
        search_attributes: Set the Crux search attributes at start (they must be
            registered on the namespace).
        eager_start: Ask for eager workflow start (see `Runtime`).
    """

    def __init__(
        self, client: Client, task_queue: str, *, search_attributes: bool, eager_start: bool
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._search_attributes = search_attributes
        self._eager_start = eager_start

    async def start(
        self,
        request: GenerationInput,
        *,
        wait_seconds: float | None = None,
        replay: bool = False,
    ) -> WorkflowHandle[Any, Finished]:
        """Start the run of `request`, or attach to the one already under its id.

        Args:
            request: The generation.
            wait_seconds: The caller's `timeout=`: a new run gets the workflow execution
                timeout that bounds it (`crux._waiting.execution_timeout`).
            replay: The generation completed before (`crux._staging.stage_call`). Its
                caller may have had the answer at the commit, before the run closed: a run
                still closing is waited for, so that this call gets a run of its own, one
                that reports the generation as replayed.
        """
        if replay:
            await self._closed(request, wait_seconds)
        return await self._client.start_workflow(
            WORKFLOW_NAME,
            request.start_payload(),
            id=workflow_id_for(request.generation_id, request.thread_id),
            task_queue=self._task_queue,
            result_type=Finished,
            execution_timeout=execution_timeout(wait_seconds),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=self._attributes(request),
            # What the Temporal UI lists: kind, model and Thread; the ids in the details.
            static_summary=generation_summary(request),
            static_details=generation_details(request),
            # When a worker for this task queue runs in this process, its first task
            # starts without a round trip through the server.
            request_eager_start=self._eager_start,
        )

    async def _closed(self, request: GenerationInput, wait_seconds: float | None) -> None:
        """Wait (briefly) for the generation's run to close, however it ends."""
        handle = self._client.get_workflow_handle(
            workflow_id_for(request.generation_id, request.thread_id)
        )
        limit = CLOSING_SECONDS if wait_seconds is None else min(wait_seconds, CLOSING_SECONDS)
        # A run that does not close in time is attached to, as any run under the id is.
        with suppress(Exception):
            await asyncio.wait_for(handle.result(), limit)

    def _attributes(self, request: GenerationInput) -> TypedSearchAttributes | None:
        if not self._search_attributes:
            return None
        pairs = [
            SearchAttributePair(STAGE, "starting"),
            SearchAttributePair(GENERATION_ID, request.generation_id),
            SearchAttributePair(MODEL, request.model),
        ]
        if request.thread_id:
            pairs.append(SearchAttributePair(THREAD_ID, request.thread_id))
        return TypedSearchAttributes(pairs)
