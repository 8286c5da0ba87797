"""Activity options of the generation workflow, each with the reason for its values.

Who retries what (one owner per kind of failure) is written down in
`workflows._storage_wait`; the commit's options are `workflows._commit`'s.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig, LocalActivityConfig

from contracts.settings import AttemptPolicySpec, ToolPolicySpec
from vocabulary.errors import ErrorType

# Storage outages are waited out by the workflow in a visible `storage_blocked` stage (with
# a ceiling), not inside an activity's retry budget: retrying them here would hide the
# outage and, for the provider call, spend attempts meant for provider failures.
_WORKFLOW_HANDLES = (ErrorType.STORAGE_UNAVAILABLE.value,)

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

_TOOL_TIMEOUT = timedelta(minutes=5)
_TOOL_ATTEMPTS = 5

RUN_TOOL = ActivityConfig(
    # Tool handlers are application code; their result is staged once, so a retry after a
    # lost completion does not run the tool again.
    start_to_close_timeout=_TOOL_TIMEOUT,
    # The activity heartbeats while the handler runs: a worker lost mid-call is noticed
    # within this, not after the five minutes.
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=_TOOL_ATTEMPTS,
        non_retryable_error_types=_WORKFLOW_HANDLES,
    ),
)


PREPARE_SUMMARY_RUN = ActivityConfig(
    # `SummaryWorkflow`'s preparation: as above, except that a storage outage is waited out
    # by the run itself, visibly (`storage_blocked`), instead of in hidden activity retries.
    start_to_close_timeout=timedelta(minutes=15),
    # The activity heartbeats while it works: a worker lost mid-preparation is noticed
    # within this, not after the fifteen minutes.
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=5,
        non_retryable_error_types=_WORKFLOW_HANDLES,
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

RECORD_PLAN_LOCAL = LocalActivityConfig(
    # One INSERT of a few hundred bytes before each attempt, as a local activity: the
    # receipt and inspection it carries never enter history (only its small marker does),
    # and it costs no scheduling round trip.
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=5,
        non_retryable_error_types=_WORKFLOW_HANDLES,
    ),
    local_retry_threshold=timedelta(seconds=5),
)


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


TOOL_TIMEOUT_GRACE = timedelta(seconds=30)
"""Room above a tool's own timeout for staging its result; a worker lost mid-call is
noticed after the timeout plus this."""


def invoke_model(policy: AttemptPolicySpec | None) -> ActivityConfig:
    """The provider-attempt options: `INVOKE_MODEL` unless a policy replaces its values."""
    if policy is None:
        return INVOKE_MODEL
    merged: ActivityConfig = {
        **INVOKE_MODEL,
        "start_to_close_timeout": timedelta(seconds=policy.timeout_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=policy.initial_interval_seconds),
            backoff_coefficient=policy.backoff_coefficient,
            maximum_interval=timedelta(seconds=policy.max_interval_seconds),
            maximum_attempts=policy.max_attempts,
            non_retryable_error_types=_WORKFLOW_HANDLES,
        ),
    }
    return merged


def run_tool(policy: ToolPolicySpec | None) -> ActivityConfig:
    """The tool-call options: `RUN_TOOL` unless the tool has a policy.

    The handler's own timeout is enforced inside the activity (so it ends as an error
    result the model sees); the activity's timeout only catches a lost worker. Attempts
    never drop below `RUN_TOOL`'s, so storage blips keep today's budget; the activity
    itself stops re-running a failing handler after `policy.max_attempts`.
    """
    if policy is None:
        return RUN_TOOL
    timeout = _TOOL_TIMEOUT
    if policy.timeout_seconds is not None:
        timeout = timedelta(seconds=policy.timeout_seconds) + TOOL_TIMEOUT_GRACE
    merged: ActivityConfig = {
        **RUN_TOOL,
        "start_to_close_timeout": timeout,
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=policy.initial_interval_seconds),
            backoff_coefficient=policy.backoff_coefficient,
            maximum_interval=timedelta(seconds=policy.max_interval_seconds),
            maximum_attempts=max(policy.max_attempts, _TOOL_ATTEMPTS),
            non_retryable_error_types=_WORKFLOW_HANDLES,
        ),
    }
    return merged


CHECK_INPUT_LOCAL = LocalActivityConfig(
    # Input safety: one read and at most one UPDATE of the staged turn, plus policies that
    # are pure functions of the text (a PII pass costs tenths of a second per 100 KB). A
    # local activity: the turn's text never enters history, and the check costs no
    # scheduling round trip. A policy that raised fails at once (non-retryable).
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=_READ_RETRIES,
    local_retry_threshold=timedelta(seconds=5),
    summary="input safety",
)

CHECK_OUTPUT_LOCAL = LocalActivityConfig(
    # Terminal safety and constraints on the final reply, as the input check; it runs in
    # the workflow task that commits, right before the commit.
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=_READ_RETRIES,
    local_retry_threshold=timedelta(seconds=5),
    summary="output checks",
)

RUN_SUCCESS_HOOK = ActivityConfig(
    # Success hooks are application code with side effects (a notification, a webhook),
    # run at least once after the commit: a few tries with backoff (1, 2, 4 s) ride out a
    # downstream blip, and a broken hook ends as a visible `failed` outcome within seconds
    # instead of holding the run. The activity heartbeats: a worker lost mid-hook is
    # noticed within 30 s and the hook runs again elsewhere.
    start_to_close_timeout=timedelta(minutes=5),
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=4,
    ),
)
