"""Operator control of a storage wait: `retry_now` ends the pause, `abandon` ends the run.

A stage waiting out a PostgreSQL outage (`storage_blocked`) or a commit that keeps failing
(`commit_blocked`) pauses between rounds. On runs carrying `OPERATOR_PATCH` the pause is a
condition with a timeout instead of a plain timer, so an update can end it early: the
timer is then cancelled, never fired. Runs without the marker keep their plain timer, so
their recorded histories replay unchanged.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contracts.operator import OPERATOR_PATCH
from vocabulary.details import ErrorDetails, encode_details
from vocabulary.errors import ErrorType


class RunAbandoned(ApplicationError):
    """An operator abandoned the run while it waited; fails it as `ThreadCommitError`.

    A subclass only so that the commit's own failure handling lets it through.
    """


def abandoned_failure() -> RunAbandoned:
    """The typed, content-free failure of an abandoned run (code `abandoned`)."""
    return RunAbandoned(
        "the staged turn was abandoned by an operator; nothing was published",
        encode_details(ErrorDetails(code="abandoned")),
        type=ErrorType.THREAD_COMMIT,
        non_retryable=True,
    )


def rejected(code: str, message: str) -> ApplicationError:
    """A typed, content-free update rejection (`GenerationStateError`)."""
    return ApplicationError(
        f"{code}: {message}",
        encode_details(ErrorDetails(code=code)),
        type=ErrorType.GENERATION_STATE,
        non_retryable=True,
    )


class OperatorControl:
    """The wait state of one run and the operator's requests on it.

    Attributes:
        waiting: Whether the run is paused between rounds of a storage wait now.
        blocked_since: When the current storage wait began (`None` outside a wait).
        last_error_type: Error type of the last failed call of the current wait.
    """

    def __init__(self) -> None:
        self.waiting = False
        self.blocked_since: datetime | None = None
        self.last_error_type: str | None = None
        self._retry = False
        self._abandon = False

    def blocked(self, since: datetime, error_type: str | None) -> None:
        """Note that the current call failed and the run waits (since `since`)."""
        self.blocked_since = since
        self.last_error_type = error_type

    def unblocked(self) -> None:
        """The call went through: the wait is over."""
        self.blocked_since = None

    def check_waiting(self, action: str) -> None:
        """Reject an update (typed, content-free) unless the run is paused in a wait.

        Raises:
            ApplicationError: `GenerationStateError` code `not_waiting`.
        """
        if not self.waiting:
            raise rejected("not_waiting", f"{action} applies only while the run waits for storage")
        if self._abandon:
            raise rejected("not_waiting", f"{action}: the run is being abandoned")

    def request_retry(self) -> None:
        """End the current pause; the next round starts at once."""
        self._retry = True

    def request_abandon(self) -> None:
        """End the current pause and the run (the staged turn is discarded)."""
        self._abandon = True

    async def pause(self, backoff: timedelta) -> None:
        """Wait `backoff`, or less when an operator asks to retry now or to abandon.

        Raises:
            RunAbandoned: An operator abandoned the run during the pause.
        """
        if not workflow.patched(OPERATOR_PATCH):
            await workflow.sleep(backoff)
            return
        self.waiting = True
        try:
            await workflow.wait_condition(lambda: self._retry or self._abandon, timeout=backoff)
        except TimeoutError:
            pass
        finally:
            self.waiting = False
        # Both may be set within one activation (the timer fired as the update arrived):
        # the operator's word wins.
        if self._abandon:
            raise abandoned_failure()
        self._retry = False
