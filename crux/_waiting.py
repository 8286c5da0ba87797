"""Waiting for a run: the caller's `timeout=`, and a task queue no worker polls.

Nothing the caller starts may hang silently. A run whose first workflow task has not
started after a few seconds is checked against the task queue's pollers: with no worker
polling it, the run is terminated (it never began, so nothing ran) and the caller gets
`NoWorkerError` naming the task queue and the command that starts a worker. A busy worker
is waited for: only the absence of pollers fails the call.

With `timeout=`, the caller waits that long at most; then the run is asked to cancel (it
discards what it staged and ends cancelled) and the caller gets `CallTimeoutError`.
The run is also started with a workflow execution timeout of `timeout` plus
`CANCEL_GRACE_SECONDS`, so it cannot outlive a caller that died before it could cancel.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError

from crux._notices import Notice, follow_to_close
from crux._outcomes import Finished, await_result
from vocabulary.errors import CallTimeoutError, ConfigurationError, NoWorkerError

FIRST_TASK_GRACE_SECONDS = 3.0
"""How long a run may wait for its first workflow task before the pollers are checked."""

POLLER_CHECK_SECONDS = 2.0
"""How often the pollers are checked while the first task has still not started."""

LIVE_POLLER_SECONDS = 90.0
"""A poller seen this recently is a live worker (a worker polls again at least every
minute, when its long poll returns empty); an older one is a worker that stopped."""

CANCEL_GRACE_SECONDS = 60.0
"""Added to `timeout=` for the run's workflow execution timeout: the caller cancels the run
when its timeout expires, the server ends it this much later if nobody did."""

_T = TypeVar("_T")

# The started run's first workflow task was scheduled (2 events): more means it started.
_UNSTARTED_HISTORY_LENGTH = 2


def execution_timeout(timeout: float | None) -> timedelta | None:
    """The workflow execution timeout of a run whose caller waits `timeout` seconds."""
    return None if timeout is None else timedelta(seconds=timeout + CANCEL_GRACE_SECONDS)


def checked_timeout(timeout: object) -> float | None:
    """`timeout=` as seconds, or `None` for no limit.

    Raises:
        ConfigurationError: Not a positive number of seconds.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(
            "timeout= is the number of seconds to wait for the reply (a positive number), "
            "or None to wait without limit",
            fields=["timeout"],
        )
    return float(timeout)


class RunWaiter:
    """Waits for generation runs on one task queue.

    Args:
        client: The Temporal client the runs were started with.
        task_queue: The task queue the runs were started on.
    """

    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue

    async def result(
        self,
        handle: WorkflowHandle[Any, Finished],
        *,
        wait_seconds: float | None = None,
        notice: Notice | None = None,
    ) -> Finished:
        """The run's result, or a typed error instead of waiting on.

        Args:
            handle: The started run.
            wait_seconds: The caller's `timeout=` (`None`: no limit).
            notice: The run's commit notice (`crux._notices`): the run is known to have
                committed as soon as it completes, before the workflow closes.

        Raises:
            NoWorkerError: No worker polls the task queue (the run was terminated).
            CallTimeoutError: `timeout` seconds passed (the run was asked to cancel).
            CruxError: The run's own typed failure.
        """
        if notice is None:
            outcome = lambda: await_result(handle)  # noqa: E731
        else:
            outcome = lambda: _answer_or_notice(await_result(handle), notice)  # noqa: E731
        return await self.bounded(handle, outcome, wait_seconds=wait_seconds)

    async def bounded(
        self,
        handle: WorkflowHandle[Any, Any],
        outcome: Callable[[], Awaitable[_T]],
        *,
        wait_seconds: float | None = None,
    ) -> _T:
        """Await `outcome()` for `wait_seconds`, watching that a worker takes the run."""
        timeout = wait_seconds
        deadline = None if timeout is None else time.monotonic() + timeout
        result = asyncio.ensure_future(outcome())
        stopping = asyncio.Event()
        watch = asyncio.ensure_future(self._watch(handle, time.monotonic(), stopping))
        try:
            pending: set[asyncio.Future[Any]] = {result, watch}
            while not result.done():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, pending = await asyncio.wait(
                    pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                if watch in done:
                    watch.result()  # raises NoWorkerError; returns once a worker took the run
                if not done:
                    await _cancel(handle)
                    assert timeout is not None
                    raise CallTimeoutError(
                        handle.id,
                        timeout,
                        f"no reply within {timeout:g} s; run {handle.id} was asked to cancel "
                        "(crux generation show tells how it ended)",
                    )
            if stopping.is_set():
                # The run ended because the watch is terminating it: its outcome is the
                # watch's `NoWorkerError`, not the termination the result reports.
                await watch
            return result.result()
        finally:
            for task in (result, watch):
                task.cancel()
            await asyncio.gather(result, watch, return_exceptions=True)

    async def _watch(
        self, handle: WorkflowHandle[Any, Any], waited_from: float, stopping: asyncio.Event
    ) -> None:
        """Return once a worker took the run; raise `NoWorkerError` when none polls.

        Args:
            handle: The run.
            waited_from: `time.monotonic()` when the wait began (just after the start).
            stopping: Set before the run is terminated.
        """
        await asyncio.sleep(FIRST_TASK_GRACE_SECONDS)
        while True:
            described = await _described(handle)
            if described is None or _taken(described):
                return
            # The server's clock, now: the run's start time plus the time waited since
            # (the pollers' times are the server's, this machine's clock may differ).
            server_now = described.start_time.timestamp() + time.monotonic() - waited_from
            if not await self._polled(server_now):
                again = await _described(handle)
                if again is None or _taken(again):
                    return  # a worker came up between the two looks
                stopping.set()
                await _terminate(handle, self._task_queue)
                raise NoWorkerError(
                    self._task_queue,
                    f'no worker polls task queue "{self._task_queue}" (namespace '
                    f'"{self._client.namespace}"): start one with `crux worker` (or `crux dev` '
                    f"for development) with CRUX_TASK_QUEUE={self._task_queue}, or give the "
                    "runtime the task queue your worker polls; the run was stopped",
                )
            await asyncio.sleep(POLLER_CHECK_SECONDS)

    async def _polled(self, server_now: float) -> bool:
        """Whether a live worker polls the task queue for workflow tasks."""
        try:
            described = await self._client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self._client.namespace,
                    task_queue=TaskQueue(
                        name=self._task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL
                    ),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
        except RPCError:
            return True  # unknown: keep waiting rather than stop a run that may be served
        return any(
            server_now - poller.last_access_time.ToDatetime().timestamp() < LIVE_POLLER_SECONDS
            if poller.HasField("last_access_time")
            else True
            for poller in described.pollers
        )


async def _answer_or_notice(answer: Awaitable[Finished], notice: Notice) -> Finished:
    """The workflow's answer, or the commit's notice when that comes first."""
    answered = asyncio.ensure_future(answer)
    try:
        await asyncio.wait({answered, notice.committed}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        answered.cancel()
        await asyncio.gather(answered, return_exceptions=True)
        raise
    if answered.done():
        return answered.result()
    follow_to_close(answered)
    return Finished.from_notice(notice.request)


async def _described(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription | None:
    """The run's description; `None` when it cannot be read (nothing to watch then)."""
    try:
        return await handle.describe()
    except RPCError:
        return None


def _taken(described: WorkflowExecutionDescription) -> bool:
    """Whether a worker started the run's first workflow task (or the run ended)."""
    return (
        described.status is not WorkflowExecutionStatus.RUNNING
        or described.history_length > _UNSTARTED_HISTORY_LENGTH
    )


async def _terminate(handle: WorkflowHandle[Any, Any], task_queue: str) -> None:
    with suppress(RPCError):  # already ended
        await handle.terminate(reason=f"no worker polls task queue {task_queue}")


async def _cancel(handle: WorkflowHandle[Any, Any]) -> None:
    with suppress(RPCError):  # already ended
        await handle.cancel()
