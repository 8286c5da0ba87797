"""Activity options of the generation workflow, each with the reason for its values."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig, LocalActivityConfig

from vocabulary.errors import ErrorType

# Storage outages are waited out by the workflow in a visible `storage_blocked` stage (with
# a ceiling), not inside an activity's retry budget: retrying them here would hide the
# outage and, for the provider call, spend attempts meant for provider failures.
_WORKFLOW_HANDLES = [ErrorType.STORAGE_UNAVAILABLE.value]

# One indexed path read plus tokenizing only the messages not yet counted; also how long a
# read lost with a crashed worker holds its generation up before a retry.
_READ_TIMEOUT = timedelta(seconds=30)
# Storage blips are transient; invalid input fails fast as non-retryable.
_READ_RETRIES = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,
    non_retryable_error_types=_WORKFLOW_HANDLES,
)

READ_REQUEST = ActivityConfig(start_to_close_timeout=_READ_TIMEOUT, retry_policy=_READ_RETRIES)

READ_REQUEST_LOCAL = LocalActivityConfig(
    # The read runs as a local activity on the worker that runs the workflow task: no
    # scheduling round trip through the server, same timeout and retries as above. The
    # first tries happen inside the workflow task; past `local_retry_threshold` they are
    # spaced by durable timers instead.
    start_to_close_timeout=_READ_TIMEOUT,
    retry_policy=_READ_RETRIES,
    local_retry_threshold=timedelta(seconds=5),
    summary="read request",
)

INVOKE_MODEL = ActivityConfig(
    # Long generations are legitimate; the heartbeat catches a dead worker much sooner.
    start_to_close_timeout=timedelta(minutes=10),
    heartbeat_timeout=timedelta(seconds=30),
    # Providers' retryable statuses (408/409/429/5xx) retry here, honouring retry-after
    # through next_retry_delay; clients never retry on their own.
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=5,
        non_retryable_error_types=_WORKFLOW_HANDLES,
    ),
)

RUN_TOOL = ActivityConfig(
    # Tool handlers are application code; their result is staged once, so a retry after a
    # lost completion does not run the tool again.
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
        non_retryable_error_types=_WORKFLOW_HANDLES,
    ),
)

PREPARE_SUMMARY = ActivityConfig(
    # Several support calls for a long prefix (hierarchical); the artifact is written once,
    # so a retry after a lost completion finds it instead of paying again.
    start_to_close_timeout=timedelta(minutes=15),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=5,
    ),
)

COUNT_REQUEST = ActivityConfig(
    # One small provider call; a failure only means the estimate's verdict stands.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=3,
        non_retryable_error_types=_WORKFLOW_HANDLES,
    ),
)

COMMIT_TURN = ActivityConfig(
    # A single transaction; bounded attempts so the workflow can surface `commit_blocked`
    # and keep retrying in its own loop instead of hiding the outage inside one activity.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=3,
    ),
)

COMMIT_TURN_LOCAL = LocalActivityConfig(
    # The commit runs as a local activity on the worker that takes the workflow task
    # after the provider answered: the turn is published and the run completes in that
    # same task, with no scheduling round trip. Same timeout and retries as above; the
    # commit replays idempotently, so a retry after a lost completion is safe.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=3,
    ),
    local_retry_threshold=timedelta(seconds=5),
    summary="commit turn",
)

COMMIT_BLOCKED_MAX_BACKOFF = timedelta(seconds=30)
"""Longest pause between commit rounds while storage stays unavailable (first path)."""

MAX_REVISION_REPLANS = 24
"""Re-reads after the Thread moved before dispatch (first path; the second path's bound is
`planner.steps.MAX_REVISION_REPLANS`)."""

STORAGE_BLOCKED_INITIAL_BACKOFF = timedelta(seconds=1)
STORAGE_BLOCKED_MAX_BACKOFF = timedelta(seconds=15)
"""Pauses between rounds of a stage waiting for storage: short enough that a 30 s outage
costs seconds, not minutes, after it ends; long enough to stay cheap in history."""


def with_summary(config: ActivityConfig, summary: str) -> ActivityConfig:
    """`config` plus the one-line summary the Temporal UI shows for the activity."""
    merged: ActivityConfig = {**config, "summary": summary}
    return merged


AWAIT_SUMMARY = ActivityConfig(
    # Waits for an identical preparation already running; it heartbeats, so a lost worker
    # is noticed quickly and the wait resumes elsewhere without paying again.
    start_to_close_timeout=timedelta(minutes=30),
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
    ),
)


DISCARD_GENERATION = ActivityConfig(
    # One DELETE on the failure path. Bounded: if storage stays away the run still ends
    # (with its own error) and the retention sweep removes the rows later.
    start_to_close_timeout=timedelta(seconds=30),
    schedule_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        maximum_interval=timedelta(seconds=10),
    ),
)
