"""Operator control of a run that waits for storage: retry at once, or give it up.

A stage blocked on PostgreSQL (`storage_blocked`, `commit_blocked`) waits out a backoff
between tries of the storage wait (`workflows._storage_wait`, the one owner of those
retries). `retry_now` ends the current pause early, `abandon` ends the run: the staged output
is discarded by the failure path and the caller gets `ThreadCommitError('abandoned')`.
Both are Temporal updates whose validators refuse them, typed and content-free, whenever
the run is not in such a wait.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contracts.failures import application_error
from contracts.generation import GenerationInput
from contracts.operator import GenerationStatus
from vocabulary.errors import OperatorError, ThreadCommitError
from vocabulary.stages import Stage

ABANDONED = "abandoned"
"""The `ThreadCommitError` code of a run an operator abandoned."""


class OperatorControl:
    """Requests from operators and what they need to know about the current wait."""

    def __init__(self) -> None:
        self.waiting = False
        self.blocked_since: datetime | None = None
        self.last_error_type: str | None = None
        self._retry = False
        self._abandon = False

    def blocked(self, since: datetime, error_type: str | None) -> None:
        """Note that a stage waits for storage since `since` after an `error_type` failure."""
        self.blocked_since = since
        self.last_error_type = error_type

    def cleared(self) -> None:
        """The stage got through: no wait is current any more."""
        self.blocked_since = None

    def interrupted(self) -> bool:
        """Whether an operator asked to retry now or to abandon (ends a pause early)."""
        return self._retry or self._abandon

    def resume(self) -> bool:
        """Consume a `retry_now` after a pause; `True` when the run was abandoned."""
        self._retry = False
        return self._abandon

    def check(self, stage: Stage, action: str) -> None:
        """Refuse `action` unless a stage waits out its backoff (an update validator)."""
        if not self.waiting or self._abandon:
            raise application_error(
                OperatorError(
                    "wrong_stage",
                    f"{action} applies only while the run waits for storage (stage {stage})",
                    stage=stage.value,
                )
            )

    def retry_now(self) -> None:
        """End the current backoff at once."""
        self._retry = True

    def abandon(self) -> None:
        """End the run: the wait raises `abandoned` and the failure path discards staging."""
        self._abandon = True

    def status(
        self, request: GenerationInput | None, stage: Stage, details: str | None, attempt: int
    ) -> GenerationStatus:
        """The content-free status of the run."""
        info = workflow.info()
        return GenerationStatus(
            workflow_id=info.workflow_id,
            stage=stage.value,
            details=details,
            attempt=attempt,
            generation_id=request.generation_id if request else "",
            thread_id=request.thread_id if request else None,
            model=request.model if request else "",
            blocked_since=self.blocked_since,
            last_error_type=self.last_error_type,
            waiting=self.waiting,
        )


class RunAbandoned(ApplicationError):
    """The run was abandoned; a subclass so that handlers of activity failures let it by."""


def abandoned_failure(stage: Stage) -> RunAbandoned:
    """`ThreadCommitError` code `abandoned`: nothing was committed, staging is discarded."""
    return application_error(
        ThreadCommitError(
            f"the run was abandoned by an operator during {stage}; nothing was committed",
            code=ABANDONED,
            stage=stage.value,
        ),
        kind=RunAbandoned,
    )
