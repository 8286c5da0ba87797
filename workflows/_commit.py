"""Publishing the accepted turn: the commit's options and its one retry owner.

The commit's retries are the workflow's storage wait (`_storage_wait.waiting_out_storage`)
and nothing else: the commit activity runs once per round (`COMMIT_TURN_LOCAL` allows one
attempt), and every failure a later round may fix (storage outages, an interrupted
publication, contention, a lost worker's timeout) keeps the accepted turn staged and waits
visibly in `commit_blocked`, where an operator's `retry_now` wakes the same loop and
`abandon` ends it. A non-retryable rejection fails the run with `ThreadCommitError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityConfig, LocalActivityConfig

from contracts.failures import application_error, rebuilt
from contracts.generation import GenerationInput
from vocabulary.errors import ThreadCommitError, ThreadError
from vocabulary.stages import Stage
from workflows._operator import RunAbandoned
from workflows._stages import StageReporter
from workflows._storage_wait import (
    ActivityFailure,
    StorageWaitExceeded,
    application_cause,
    waiting_out_storage,
)

_T = TypeVar("_T")

COMMIT_TURN_LOCAL = LocalActivityConfig(
    # The commit runs as a local activity on the worker that takes the workflow task
    # after the provider answered: the turn is published and the run completes in that
    # same task, with no scheduling round trip. One attempt: the storage wait owns every
    # retry (a retry here would hide an outage from `commit_blocked` and from operators).
    # The commit replays idempotently, so a later round after a lost completion is safe.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=1),
    summary="commit turn",
)


COMMIT_TURN = ActivityConfig(
    # The same commit as a regular activity, for generations with a time budget: the
    # budget's timer must be able to fire while the commit is in flight, which a local
    # activity (holding the workflow task) would only let it do afterwards. One attempt,
    # as above: the storage wait owns the retries.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(maximum_attempts=1),
    summary="commit turn",
)


def is_retryable(error: ActivityError | ApplicationError) -> bool:
    """Whether a later round may succeed: anything but a non-retryable rejection.

    A turn the provider already answered must not be lost, so an untyped failure (a
    timeout of a lost worker) is tried again too.
    """
    cause = application_cause(error)
    return not (cause is not None and cause.non_retryable)


def commit_rejected(
    stages: StageReporter, error: ActivityError | ApplicationError
) -> ApplicationError:
    """`ThreadCommitError`: the commit was rejected, so no success may be reported."""
    cause = application_cause(error)
    rejection = rebuilt(cause) if cause is not None else None
    code = rejection.code if isinstance(rejection, ThreadError) else "commit_failed"
    stages.set(Stage.FAILED, "commit rejected")
    return application_error(
        ThreadCommitError("the accepted turn could not be published", code=code)
    )


async def committing(
    stages: StageReporter,
    request: GenerationInput,
    commit: Callable[[], Awaitable[_T]],
    *,
    local: bool = False,
) -> _T:
    """Run `commit` (one commit activity) until it succeeds or is rejected.

    `local` says the commit is a local activity (see `waiting_out_storage`).

    Raises:
        ApplicationError: `ThreadCommitError` when the commit was rejected or abandoned,
            `StorageUnavailableError` once the wait outlasts `storage_wait_seconds`.
    """
    try:
        return await waiting_out_storage(
            stages,
            request,
            Stage.COMMITTING,
            commit,
            blocked=Stage.COMMIT_BLOCKED,
            outage=is_retryable,
            local=local,
        )
    except (StorageWaitExceeded, RunAbandoned):
        raise
    except ActivityFailure as error:
        raise commit_rejected(stages, error) from None
