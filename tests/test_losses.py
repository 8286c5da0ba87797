"""A step lost with its worker is told apart from a step that failed.

The summary preparation is prepared again only after a loss: every try timed out (a worker
killed mid-call), or the run it joined did. A typed failure on the way (a provider's error,
a storage outage) keeps its meaning, however deep the timeout below it.
"""

from __future__ import annotations

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    RetryState,
    TimeoutError,
    TimeoutType,
)

from contracts.activities import SUMMARY_RUN_LOST
from contracts.losses import lost_with_its_worker
from vocabulary.errors import ErrorType


def _activity(cause: BaseException) -> ActivityError:
    error = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type="crux.prepare_summary",
        activity_id="1",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    error.__cause__ = cause
    return error


def _child(cause: BaseException) -> ChildWorkflowError:
    error = ChildWorkflowError(
        "child failed",
        namespace="default",
        workflow_id="summary:x",
        run_id="r",
        workflow_type="SummaryWorkflow",
        initiated_event_id=3,
        started_event_id=4,
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    error.__cause__ = cause
    return error


def _heartbeat_timeout() -> TimeoutError:
    return TimeoutError("heartbeat", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[])


def test_a_preparation_whose_tries_all_timed_out_was_lost() -> None:
    # The inline child's activity ran out of tries, each lost with its worker.
    assert lost_with_its_worker(_child(_activity(_heartbeat_timeout())))
    # The generation's wait for a joined run timed out itself.
    assert lost_with_its_worker(_activity(_heartbeat_timeout()))
    # The joined run timed out: the join reports it typed.
    joined = ApplicationError("lost", type=SUMMARY_RUN_LOST, non_retryable=True)
    assert lost_with_its_worker(_activity(joined))


def test_a_typed_failure_is_not_a_loss_even_over_a_timeout() -> None:
    provider = ApplicationError("provider", type=ErrorType.PROVIDER_HTTP, non_retryable=True)
    assert not lost_with_its_worker(_child(_activity(provider)))
    storage = ApplicationError("down", type=ErrorType.STORAGE_UNAVAILABLE)
    storage.__cause__ = _heartbeat_timeout()
    assert not lost_with_its_worker(_child(_activity(storage)))


def test_untyped_failures_and_cancellations_are_not_losses() -> None:
    assert not lost_with_its_worker(_child(_activity(ApplicationError("untyped"))))
    assert not lost_with_its_worker(_child(CancelledError("cancelled")))
    assert not lost_with_its_worker(RuntimeError("not from Temporal"))
