"""`Runtime.parallel`: members built by the call builder, run as children of one workflow.

Every member's call is built exactly as `generate` builds one (`crux._members`): the same
validation, rendering, staging and identity claim. The parallel id derives each member's
generation id, so running the same id again replays the committed turns instead of adding
new ones. The parent workflow returns ids only; results are loaded from PostgreSQL here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy

from contracts.parallel import MemberFailure, ParallelOutcome
from crux._members import build_members, check_members, start_payload
from crux._outcomes import Finished, Generation, domain_error, rebuild_error
from crux._request import CallBuilder
from crux._results import StoredResults
from crux._staging import BuiltCall, stage_call
from crux._waiting import RunWaiter, checked_timeout, execution_timeout
from crux.agents import Agent
from crux.options import RunOptions
from crux.output import Output
from crux.prompts import Prompt
from storage import GenerationStore
from vocabulary.errors import (
    CruxError,
    GenerationFailedError,
    OutputValidationError,
    ThreadError,
)
from vocabulary.ids import parallel_workflow_id

PARALLEL_WORKFLOW_NAME = "ParallelGenerationWorkflow"


@dataclass(frozen=True)
class ParallelRun:
    """The outcome of `Runtime.parallel`: one entry per member, success or typed error.

    A member's failure is its entry's error object, never an exception of the whole call,
    so the other members' committed turns are always reported.

    Attributes:
        id: The parallel id (the idempotency key of the run).
        workflow_id: The parent workflow's id.
        results: Per member name, its `Generation` (text, receipts, its own
            `thread_commit`) or its typed `CruxError` (a `ProviderHTTPError`, a
            `RequestCompositionError`, ...).
    """

    id: str
    workflow_id: str
    results: Mapping[str, Generation | CruxError]

    @property
    def generations(self) -> dict[str, Generation]:
        """The members that completed, by name."""
        return {k: v for k, v in self.results.items() if isinstance(v, Generation)}

    @property
    def errors(self) -> dict[str, CruxError]:
        """The members that failed, by name, with their typed errors."""
        return {k: v for k, v in self.results.items() if isinstance(v, CruxError)}

    def __getitem__(self, member: str) -> Generation:
        """The member's generation; its typed error is raised if it failed.

        Raises:
            KeyError: No member of that name.
            CruxError: The member's own typed error.
        """
        result = self.results[member]
        if isinstance(result, CruxError):
            raise result
        return result


class ParallelRunner:
    """Runs parallel members: built like `generate`'s calls, children of one workflow.

    Args:
        client: A Temporal client using the pydantic data converter.
        task_queue: The Crux worker's task queue.
        calls: The runtime's call builder (its defaults apply to every member).
        generations: Where member calls are staged.
        results: Where finished members are read back.
    """

    def __init__(
        self,
        client: Client,
        task_queue: str,
        *,
        calls: CallBuilder,
        generations: GenerationStore,
        results: StoredResults,
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._calls = calls
        self._generations = generations
        self._results = results

    async def run(
        self,
        parallel_id: str,
        agents: Mapping[str, Prompt | Agent | str],
        options: RunOptions,
        *,
        context: Any,
        threads: Mapping[str, object] | None,
    ) -> ParallelRun:
        """Validate, build and stage every member, then run them (`Runtime.parallel`).

        Raises:
            ConfigurationError: An invalid id, member name or option (before anything runs).
            ThreadError: `identity_conflict` when the id was used with other content.
        """
        check_members(parallel_id, agents, threads)
        wait_seconds = checked_timeout(options.get("timeout"))
        calls = build_members(
            parallel_id, agents, options, context=context, threads=threads, calls=self._calls
        )
        start_payload(parallel_id, calls)  # validates the whole before anything is staged
        for call in calls.values():
            await stage_call(call, self._generations)
        return await run_parallel(
            self._client,
            self._task_queue,
            parallel_id,
            calls,
            hydrate=self._results.finished,
            wait_seconds=wait_seconds,
        )


async def run_parallel(
    client: Client,
    task_queue: str,
    parallel_id: str,
    calls: Mapping[str, BuiltCall],
    *,
    hydrate: Callable[[Finished, Output | None], Awaitable[Generation]],
    wait_seconds: float | None = None,
) -> ParallelRun:
    """Start (or attach to) the parent workflow of staged calls and collect each result.

    Args:
        client: The Temporal client.
        task_queue: The workers' task queue.
        parallel_id: The run's id.
        calls: The staged member calls.
        hydrate: Reads a finished member's complete result back.
        wait_seconds: The caller's `timeout=` (`None`: no limit).

    Raises:
        ConfigurationError: The parent rejected its input.
        NoWorkerError: No worker polls the task queue (the run was stopped).
        CallTimeoutError: `wait_seconds` passed (the run was asked to cancel, and
            with it its members).
    """
    workflow_id = parallel_workflow_id(parallel_id)
    handle = await client.start_workflow(
        PARALLEL_WORKFLOW_NAME,
        start_payload(parallel_id, calls),
        id=workflow_id,
        task_queue=task_queue,
        result_type=ParallelOutcome,
        # The same id while the run is in flight attaches to it; after it ended, a new run
        # replays the committed members (their generation ids are the same).
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"parallel run of {len(calls)} members",
        execution_timeout=execution_timeout(wait_seconds),
    )

    async def outcome_of() -> ParallelOutcome:
        try:
            return await handle.result()
        except WorkflowFailureError as failure:
            error = domain_error(failure)
            raise error from error.__cause__

    outcome = await RunWaiter(client, task_queue).bounded(
        handle, outcome_of, wait_seconds=wait_seconds
    )
    results: dict[str, Generation | CruxError] = {}
    for member in outcome.members:
        if member.outcome is None:
            results[member.name] = member_error(member.failure or MemberFailure())
            continue
        finished = Finished(
            generation_id=member.outcome.generation_id,
            thread_id=member.outcome.thread_id,
            thread_commit=member.outcome.thread_commit,
            replayed=member.outcome.replayed,
        )
        try:
            call = calls.get(member.name)
            results[member.name] = await hydrate(finished, call.output if call else None)
        except (ThreadError, OutputValidationError) as error:
            # The member's Thread was deleted since: that member's error, nobody else's.
            results[member.name] = error
    return ParallelRun(id=parallel_id, workflow_id=workflow_id, results=results)


def member_error(failure: MemberFailure) -> CruxError:
    """The typed error a member's failure record stands for."""
    if failure.kind == "error":
        return rebuild_error(
            failure.error_type,
            failure.message,
            failure.details,
            non_retryable=failure.non_retryable,
        )
    messages = {
        "cancelled": "the generation was cancelled",
        "terminated": "the generation was terminated",
        "timed_out": "the generation timed out",
        "already_running": "an earlier run of this member is still running",
    }
    return GenerationFailedError(failure.kind, messages[failure.kind])
