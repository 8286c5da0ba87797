"""The generation workflow's operator handlers: the `describe` query and two updates.

A base class of `ManagedGenerationWorkflow`, so the handlers are registered on it while the
workflow module keeps to the generation loop. The updates only set a request on the run's
`OperatorControl`; the storage wait that is paused carries it out.
"""

from __future__ import annotations

from temporalio import workflow

from contracts.generation import GenerationInput
from contracts.operator import QUERY_DESCRIBE, UPDATE_ABANDON, UPDATE_RETRY_NOW, GenerationStatus
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows.legacy.generation import LegacyGeneration


class OperatorHandlers:
    """`describe`, `retry_now` and `abandon` over the state the workflow keeps."""

    _stages: StageReporter
    _legacy: LegacyGeneration | None
    _request: GenerationInput | None
    _progress: TurnProgress | None

    @workflow.query(name=QUERY_DESCRIBE)
    def describe(self) -> GenerationStatus:
        """The run's content-free status: stage, details, attempt, ids, model, wait state."""
        info = workflow.info()
        if self._legacy is not None:
            return GenerationStatus(workflow_id=info.workflow_id, stage=self._legacy.stage)
        request = self._request
        operator = self._stages.operator
        return GenerationStatus(
            workflow_id=info.workflow_id,
            stage=self._stages.stage.value,
            details=self._stages.details,
            attempt=self._progress.attempt if self._progress is not None else None,
            generation_id=request.generation_id if request is not None else None,
            thread_id=request.thread_id if request is not None else None,
            model=request.model if request is not None else None,
            waiting=operator.waiting,
            blocked_since=operator.blocked_since,
            last_error_type=operator.last_error_type,
        )

    @workflow.update(name=UPDATE_RETRY_NOW)
    def retry_now(self) -> GenerationStatus:
        """End the current storage wait's pause: the blocked call is tried again at once."""
        self._stages.operator.request_retry()
        return self.describe()

    @retry_now.validator
    def _check_retry_now(self) -> None:
        self._stages.operator.check_waiting(UPDATE_RETRY_NOW)

    @workflow.update(name=UPDATE_ABANDON)
    def abandon(self) -> GenerationStatus:
        """Drop the staged turn and fail the run with `ThreadCommitError` `abandoned`."""
        self._stages.operator.request_abandon()
        return self.describe()

    @abandon.validator
    def _check_abandon(self) -> None:
        self._stages.operator.check_waiting(UPDATE_ABANDON)
