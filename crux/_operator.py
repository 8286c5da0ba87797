"""Operator control of generation runs: status, retry now, abandon.

A run is named by its workflow id (`crux/gen/...`) or by its generation id (with the
Thread for a Thread generation); both resolve to the same workflow id the facade starts.

One workflow id can have several runs: a run that failed and was started again, or a
finished generation started again (the new run only replays the stored turn). The status
shown is that of the run that matters: the one still running, else the first that completed
(the one that committed), else the latest. Its status comes from the run's `describe` query,
answered by a worker; when no worker answers within the query timeout, from what Temporal
keeps without one (the run's status and the Crux search attributes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from contracts.failures import rebuilt
from contracts.operator import GenerationStatus
from contracts.search import GENERATION_ID, MODEL, STAGE, THREAD_ID
from vocabulary.errors import ConfigurationError, CruxError, OperatorError
from vocabulary.ids import (
    MAX_SCOPE_ID_LENGTH,
    MAX_WORKFLOW_ID_BYTES,
    check_wire_id,
    workflow_id_for,
)

_WORKFLOW_PREFIX = "crux/gen/"

DEFAULT_QUERY_TIMEOUT = timedelta(seconds=10)
"""How long a status query waits for a worker before the status is read without one."""

DEFAULT_UPDATE_TIMEOUT = timedelta(seconds=30)
"""How long `retry_now` / `abandon` wait for a worker to accept them."""

_MAX_RUNS = 20
"""Runs of one workflow id considered (a generation is started again rarely)."""


class NoWorkerError(CruxError):
    """No worker answered a run's query or update in time.

    Attributes:
        task_queue: The run's task queue.
        pollers: How many workers poll it (0: none runs).
    """

    def __init__(self, message: str, *, task_queue: str, pollers: int) -> None:
        super().__init__(message)
        self.task_queue = task_queue
        self.pollers = pollers


@dataclass(frozen=True)
class RunView:
    """What an operator sees of a generation's run.

    Attributes:
        status: The content-free status.
        run_id: The Temporal run shown.
        run_status: Temporal's status of that run (`RUNNING`, `COMPLETED`, ...).
        runs: How many runs the workflow id has.
        source: `query` (the worker answered) or `search-attributes` (no worker did).
        note: Why the status was read without a worker, with the remedy; else `None`.
    """

    status: GenerationStatus
    run_id: str
    run_status: str
    runs: int
    source: Literal["query", "search-attributes"]
    note: str | None = None

    def document(self) -> dict[str, Any]:
        """The status with the run's fields, as JSON values."""
        return {
            **self.status.model_dump(mode="json"),
            "run_id": self.run_id,
            "run_status": self.run_status,
            "runs": self.runs,
            "source": self.source,
            "note": self.note,
        }


def resolve_workflow_id(run: str, thread: str | None = None) -> str:
    """The workflow id of `run`: a workflow id as given, a generation id resolved.

    Raises:
        ConfigurationError: `run` or `thread` is not an id (not a string, empty, padded,
            holding control characters or unstorable text), or the workflow id would
            exceed Temporal's limit.
    """
    check_wire_id(run, "run", limit=MAX_WORKFLOW_ID_BYTES)
    if run.startswith(_WORKFLOW_PREFIX):
        return run
    if thread is not None:
        check_wire_id(thread, "thread", limit=MAX_SCOPE_ID_LENGTH)
    workflow_id = workflow_id_for(run, thread)
    if len(workflow_id.encode()) > MAX_WORKFLOW_ID_BYTES:
        raise ConfigurationError(f"the workflow id would exceed {MAX_WORKFLOW_ID_BYTES} bytes")
    return workflow_id


class RunOperator:
    """Operator control of generation runs (`Runtime` and `crux generation` delegate here).

    Args:
        client: The Temporal client the runs are reached through.
        query_timeout: How long a status query waits for a worker.
        update_timeout: How long `retry_now` / `abandon` wait for a worker.
    """

    def __init__(
        self,
        client: Client,
        *,
        query_timeout: timedelta = DEFAULT_QUERY_TIMEOUT,
        update_timeout: timedelta = DEFAULT_UPDATE_TIMEOUT,
    ) -> None:
        self._client = client
        self._query_timeout = query_timeout
        self._update_timeout = update_timeout

    async def _operated_handle(self, run: str, thread: str | None) -> WorkflowHandle[Any, Any]:
        workflow_id = resolve_workflow_id(run, thread)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            await handle.describe(rpc_timeout=self._query_timeout)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise OperatorError("not_found", f"no generation run {workflow_id}") from None
            raise
        return handle

    async def generation_status(self, run: str, *, thread: str | None = None) -> GenerationStatus:
        """The content-free status of a run (`Runtime.generation_status`)."""
        return (await self.inspect(run, thread=thread)).status

    async def inspect(self, run: str, *, thread: str | None = None) -> RunView:
        """The status of the run that matters, with which run it is and how it was read.

        Raises:
            OperatorError: `not_found` when the workflow id has no run.
        """
        workflow_id = resolve_workflow_id(run, thread)
        runs = await self._runs(workflow_id)
        if not runs:
            raise OperatorError("not_found", f"no generation run {workflow_id}")
        chosen = _run_that_matters(runs)
        handle = self._client.get_workflow_handle(workflow_id, run_id=chosen.run_id)
        run_status = chosen.status.name if chosen.status else "UNKNOWN"
        try:
            status = await handle.query(
                "describe", result_type=GenerationStatus, rpc_timeout=self._query_timeout
            )
            return RunView(status, chosen.run_id, run_status, len(runs), "query")
        except (RPCError, WorkflowQueryFailedError, TimeoutError):
            pass  # no worker answered: what Temporal keeps without one
        pollers = await self._pollers(chosen.task_queue)
        note = (
            f"no worker answered within {self._query_timeout.total_seconds():g} s "
            + (
                f"(none polls task queue {chosen.task_queue}: start one with crux worker, or "
                "crux dev)"
                if pollers == 0
                else f"({pollers} poll task queue {chosen.task_queue}; they may be busy)"
            )
            + "; stage from the CruxStage search attribute"
        )
        status = _status_without_worker(workflow_id, chosen)
        return RunView(status, chosen.run_id, run_status, len(runs), "search-attributes", note)

    async def retry_generation(self, run: str, *, thread: str | None = None) -> str:
        """Make a waiting run try again at once (`Runtime.retry_generation`)."""
        return await self._update(run, thread, "retry_now")

    async def abandon_generation(self, run: str, *, thread: str | None = None) -> str:
        """Give up a waiting run (`Runtime.abandon_generation`)."""
        return await self._update(run, thread, "abandon")

    async def _runs(self, workflow_id: str) -> list[WorkflowExecution]:
        found: dict[str, WorkflowExecution] = {}
        if not any(character in workflow_id for character in "'\\\n"):
            # Visibility lists every run of the id; it may lag a moment behind a start.
            query = f"WorkflowId = '{workflow_id}'"
            async for execution in self._client.list_workflows(
                query, limit=_MAX_RUNS, rpc_timeout=self._query_timeout
            ):
                found[execution.run_id] = execution
        try:
            latest = await self._client.get_workflow_handle(workflow_id).describe(
                rpc_timeout=self._query_timeout
            )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return list(found.values())
            raise
        found[latest.run_id] = latest
        return sorted(found.values(), key=lambda execution: execution.start_time)

    async def _pollers(self, task_queue: str) -> int:
        try:
            described = await self._client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self._client.namespace,
                    task_queue=TaskQueue(name=task_queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                ),
                timeout=self._query_timeout,
            )
        except RPCError:
            return -1
        return len(described.pollers)

    async def _update(self, run: str, thread: str | None, name: str) -> str:
        handle = await self._operated_handle(run, thread)
        try:
            result = await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
                name, result_type=str, rpc_timeout=self._update_timeout
            )
            return str(result)
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            refused = rebuilt(cause) if isinstance(cause, ApplicationError) else None
            if isinstance(refused, OperatorError):
                # The validator's own words: which command, and the stage it found.
                raise refused from None
            raise
        except RPCTimeoutOrCancelledError:
            # The SDK's own type for an update no worker accepted in time.
            raise await self._no_worker(handle, name) from None
        except RPCError as error:
            # A run that already ended takes no updates.
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise OperatorError("wrong_stage", f"{name} refused: the run has ended") from None
            if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise await self._no_worker(handle, name) from None
            raise

    async def _no_worker(self, handle: WorkflowHandle[Any, Any], name: str) -> NoWorkerError:
        described = await handle.describe()
        pollers = await self._pollers(described.task_queue)
        return NoWorkerError(
            f"no worker accepted {name} within {self._update_timeout.total_seconds():g} s"
            + (
                f": none polls task queue {described.task_queue}; start one with "
                "crux worker, or crux dev"
                if pollers == 0
                else f" ({pollers} poll task queue {described.task_queue}; they may be busy)"
            ),
            task_queue=described.task_queue,
            pollers=pollers,
        )


def _run_that_matters(runs: list[WorkflowExecution]) -> WorkflowExecution:
    """The running run, else the first completed (it committed), else the latest."""
    for execution in runs:
        if execution.status == WorkflowExecutionStatus.RUNNING:
            return execution
    for execution in runs:
        if execution.status == WorkflowExecutionStatus.COMPLETED:
            return execution
    return runs[-1]


_CLOSED_STAGES = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "cancelled",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
}


def _status_without_worker(workflow_id: str, execution: WorkflowExecution) -> GenerationStatus:
    attributes = execution.typed_search_attributes
    stage = attributes.get(STAGE) or "unknown"
    closed = _CLOSED_STAGES.get(execution.status) if execution.status else None
    if closed is not None and stage not in ("completed", "failed", "cancelled"):
        # Temporal's own status of a closed run wins over a stage set before it closed.
        stage = closed
    generation_id = attributes.get(GENERATION_ID) or workflow_id.rsplit("/", 1)[-1]
    return GenerationStatus(
        workflow_id=workflow_id,
        stage=stage,
        generation_id=generation_id,
        thread_id=attributes.get(THREAD_ID),
        model=attributes.get(MODEL) or "unknown",
    )
