"""Telling a step lost with its worker from a step that failed.

Temporal reports an activity whose every try timed out (a worker killed mid-call, its
heartbeat missed) as a `TimeoutError` under the activity's or child workflow's failure. Such
a step was not refused by anything it called: running it again may well succeed, while a
typed application failure (a provider's error, a storage outage) keeps its meaning.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, FailureError, TimeoutError

from contracts.activities import SUMMARY_RUN_LOST

__all__ = ["lost_with_its_worker"]


def lost_with_its_worker(error: BaseException) -> bool:
    """Whether `error` says the step timed out (or joined a run that did), typed by nothing.

    The cause chain is walked outside in: the first typed application failure decides
    (only `SUMMARY_RUN_LOST` counts as a loss), else the first timeout does.
    """
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type is not None:
            return cause.type == SUMMARY_RUN_LOST
        if isinstance(cause, TimeoutError):
            return True
        cause = cause.cause if isinstance(cause, FailureError) else cause.__cause__
    return False
