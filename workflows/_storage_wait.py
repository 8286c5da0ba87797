"""Waiting out a PostgreSQL outage, visibly, for every stage that touches storage.

Each kind of failure has exactly one owner of its retries:

| what fails                               | retried by                                        |
| ---------------------------------------- | ------------------------------------------------- |
| storage, in any stage of a generation    | this module's wait (`storage_blocked`)            |
| the commit, whatever failed              | this module's wait alone (`commit_blocked`; the   |
|                                          | commit activity has one attempt: `_commit`)       |
| a provider attempt (408, 429, 5xx, ...)  | the activity's `RetryPolicy` (`_options`),        |
|                                          | honouring retry-after; clients never retry        |
| a tool handler                           | the tool activity's policy (`_options.run_tool`)  |
| a lost worker, a timed-out read          | the activity's `RetryPolicy` (`_options`)         |
| the staging write of a paid answer or a  | `activities._outage.keeping_side_effect` for      |
| tool result                              | seconds, then this module's wait                  |
| storage, while a summary is prepared     | `SummaryWorkflow`'s own wait (`workflows.summary`)|
| discarding staging after a failure       | `_options.DISCARD_GENERATION` (bounded)           |

The activities fail fast on an outage (their retry policies list `StorageUnavailableError`
as non-retryable; the commit activity has one attempt), so the wait is the workflow's: it
shows in the stage query, the current details and `CruxStage`, costs none of the provider's
attempts, and ends in a typed `StorageUnavailableError` once it outlasts the generation's
`storage_wait_seconds`. An operator's `retry_now` ends the current pause early and `abandon`
ends the run (`workflows._operator`); neither is a loop of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from contracts.failures import application_error
from contracts.generation import GenerationInput
from vocabulary.errors import ErrorType, StorageUnavailableError
from vocabulary.stages import Stage
from workflows._operator import OperatorControl, abandoned_failure
from workflows._stages import StageReporter

_T = TypeVar("_T")

INITIAL_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(seconds=15)
"""Pauses between rounds of a stage waiting for storage: short enough that a 30 s outage
costs seconds, not minutes, after it ends; long enough to stay cheap in history."""


ActivityFailure = (ActivityError, ApplicationError)
"""How a failed activity surfaces in workflow code: an `ActivityError` wrapping the cause,
or, for a local activity whose retries ran out, the activity's own `ApplicationError`."""


class StorageWaitExceeded(ApplicationError):
    """Storage stayed unavailable past the generation's `storage_wait_seconds`.

    Fails the run as a `StorageUnavailableError`; a subclass only so that callers handling
    their activity's own failures let it through.
    """


def application_cause(error: ActivityError | ApplicationError) -> ApplicationError | None:
    """The activity's own typed failure, if it raised one."""
    if isinstance(error, ApplicationError):
        return error
    cause = error.cause
    return cause if isinstance(cause, ApplicationError) else None


def is_storage_outage(error: ActivityError | ApplicationError) -> bool:
    """Whether an activity failed because PostgreSQL was unavailable."""
    cause = application_cause(error)
    return cause is not None and cause.type == ErrorType.STORAGE_UNAVAILABLE


async def waiting_out_storage(
    stages: StageReporter,
    request: GenerationInput,
    stage: Stage,
    call: Callable[[], Awaitable[_T]],
    *,
    blocked: Stage = Stage.STORAGE_BLOCKED,
    outage: Callable[[ActivityError | ApplicationError], bool] = is_storage_outage,
    local: bool = False,
) -> _T:
    """Run `call` (one activity), retrying it while storage is unavailable.

    Args:
        stages: The run's stage reporter.
        request: The generation (its `storage_wait_seconds` is the ceiling).
        stage: The stage `call` belongs to (named in details and in the final error).
        call: Schedules the activity and returns its result.
        blocked: The stage shown while waiting (`commit_blocked` for the commit).
        outage: Which activity failures mean "wait and try again".
        local: `call` is a local activity: it runs within the current workflow task, so
            the stage is not published for it (a stage passed within one workflow task is
            never observable); the next wait on the server, or the end, publishes it.

    Returns:
        The activity's result.

    Raises:
        ActivityError: A failure that is not an outage (or the `ApplicationError` of a
            local activity).
        StorageWaitExceeded: Typed `StorageUnavailableError` once the wait outlasts the
            ceiling.
    """
    backoff = INITIAL_BACKOFF
    since: datetime | None = None
    rounds = 0
    while True:
        if not local:
            stages.publish()
        try:
            result = await call()
        except ActivityFailure as error:
            if not outage(error):
                stages.control.cleared()
                raise
            cause = application_cause(error)
            error_type = cause.type if cause is not None else type(error).__name__
        else:
            stages.control.cleared()
            return result
        since = since or workflow.now()
        stages.control.blocked(since, error_type)
        rounds += 1
        _check_ceiling(stages, request, since, stage)
        stages.set(blocked, f"{stage}: round {rounds} waiting for storage")
        stages.publish()
        # The stage stays blocked through the next try too: a call that hangs on an
        # unreachable server must not look like progress. The caller's next stage
        # replaces it once the call succeeds.
        await _pause(stages.control, stage, backoff)
        backoff = min(backoff * 2, MAX_BACKOFF)


async def _pause(control: OperatorControl, stage: Stage, delay: timedelta) -> None:
    """Wait out `delay`, less if an operator asks to retry now (or abandons the run).

    Raises:
        RunAbandoned: `ThreadCommitError` code `abandoned` when abandoned.
    """
    control.waiting = True
    try:
        # A timer like `workflow.sleep`, cancelled early when an update arrives.
        await workflow.wait_condition(control.interrupted, timeout=delay)
    except TimeoutError:
        pass
    finally:
        control.waiting = False
    if control.resume():
        raise abandoned_failure(stage)


def _check_ceiling(
    stages: StageReporter, request: GenerationInput, since: datetime, stage: Stage
) -> None:
    """Fail the run, typed, once storage has been unavailable for too long."""
    waited = workflow.now() - since
    if waited < timedelta(seconds=request.storage_wait_seconds):
        return
    stages.set(Stage.FAILED, f"storage unavailable during {stage}")
    raise application_error(
        StorageUnavailableError(
            f"storage unavailable for {int(waited.total_seconds())} s during {stage}"
            f" (storage_wait_seconds={request.storage_wait_seconds})",
            stage=stage.value,
        ),
        kind=StorageWaitExceeded,
    )
