"""A generation's time budget: everything before the commit stops when it expires.

Counted from the run's start (`time_budget_seconds`). The work before the commit (the
read, the gate's checks, planning, summaries, provider attempts, tool rounds, approvals)
runs as one task raced against a durable timer; when the timer wins, the task is
cancelled, which cancels whatever activity or wait it is in, and the run fails with
`GenerationTimeoutError(committed=False)`.

A commit is never abandoned (the seed: "if the provider time budget expires while a
publication is already in flight, the operation waits for the commit outcome"). With a
budget, the commit runs as a regular activity rather than a local one, so the timer can
fire while it is in flight (a local activity holds the workflow task, and the timer would
only be seen after it); the run waits for the outcome and then reports
`GenerationTimeoutError(committed=True)`. A generation without a budget schedules no timer
and keeps its commit local: nothing here costs it a command.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio import workflow

from contracts.failures import application_error
from contracts.generation import GenerationInput
from vocabulary.gate_errors import GenerationTimeoutError
from vocabulary.stages import Stage
from workflows._stages import StageReporter

_T = TypeVar("_T")


class TimeBudget:
    """The time budget of one generation (a no-op without one).

    Args:
        request: The generation input (`time_budget_seconds`).
    """

    def __init__(self, request: GenerationInput) -> None:
        self.seconds = request.time_budget_seconds
        self._deadline: datetime | None = None
        if self.seconds is not None:
            self._deadline = workflow.info().workflow_start_time + timedelta(seconds=self.seconds)
        self.expired_in_commit = False
        """The budget expired while the commit was in flight (the run waited for it)."""

    @property
    def set(self) -> bool:
        """Whether the generation has a time budget."""
        return self._deadline is not None

    def _remaining(self) -> float:
        assert self._deadline is not None
        return max(0.0, (self._deadline - workflow.now()).total_seconds())

    async def within(self, stages: StageReporter, work: Coroutine[Any, Any, _T]) -> _T:
        """Run `work` (everything before the commit) within the budget.

        Raises:
            ApplicationError: `GenerationTimeoutError(committed=False)` when the budget
                expired first; `work` was cancelled.
        """
        if self._deadline is None:
            return await work
        task = asyncio.ensure_future(work)
        await _until_done(task, self._remaining())
        if task.done():
            return task.result()
        stage = stages.stage
        task.cancel()
        # Let the cancelled work unwind (its activity is asked to stop; nothing waits for
        # the provider to answer).
        await asyncio.wait([task])
        stages.set(Stage.FAILED, f"time budget expired during {stage}")
        raise application_error(
            GenerationTimeoutError(
                committed=False, budget_seconds=self.seconds or 0.0, stage=stage.value
            )
        )

    async def awaiting_commit(self, commit: Awaitable[_T]) -> _T:
        """Wait for the commit to its end, noting whether the budget expired meanwhile."""
        if self._deadline is None:
            return await commit
        task = asyncio.ensure_future(commit)
        await _until_done(task, self._remaining())
        # Not done: the budget expired first. The publication is not abortable, so the run
        # waits for its outcome, whatever it takes, and reports the expiry afterwards.
        self.expired_in_commit = not task.done()
        return await task

    def late_commit(self, stages: StageReporter) -> BaseException | None:
        """The error of a run whose budget expired while its commit was in flight."""
        if not self.expired_in_commit:
            return None
        stages.set(Stage.FAILED, "time budget expired during committing (turn committed)")
        return application_error(
            GenerationTimeoutError(
                committed=True,
                budget_seconds=self.seconds or 0.0,
                stage=Stage.COMMITTING.value,
            )
        )


async def _until_done(task: asyncio.Future[Any], seconds: float) -> None:
    """Wait until `task` is done or `seconds` (a durable timer) have passed."""
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(task.done, timeout=seconds)
