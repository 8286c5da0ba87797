"""`Runtime.parallel`: members built by the call builder, run as children of one workflow.

Every member's call is built exactly as `generate` builds one (`crux._request`): the same
validation, rendering, staging and identity claim. The parallel id derives each member's
generation id, so running the same id again replays the committed turns instead of adding
new ones. The parent workflow returns ids only; results are loaded from PostgreSQL here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy

from contracts.generation import CompositionSpec
from contracts.parallel import (
    MAX_PARALLEL_MEMBERS,
    MemberFailure,
    ParallelInput,
    ParallelOutcome,
)
from crux._outcomes import Finished, Generation, domain_error, rebuild_error
from crux._request import BuiltCall, CallOptions
from vocabulary.errors import ConfigurationError, CruxError, GenerationFailedError, ThreadError
from vocabulary.ids import (
    MAX_MEMBER_NAME_LENGTH,
    MAX_PARALLEL_ID_LENGTH,
    check_wire_id,
    parallel_member_generation_id,
    parallel_workflow_id,
)
from workflows._decode import describe_invalid

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


def check_members(
    parallel_id: str, agents: Mapping[str, object], threads: Mapping[str, object] | None
) -> None:
    """Validate the parallel id and the member names (content-free messages).

    Raises:
        ConfigurationError: An invalid id, no members, too many, or an invalid name.
    """
    check_wire_id(parallel_id, "parallel id", limit=MAX_PARALLEL_ID_LENGTH)
    if not isinstance(agents, Mapping) or not agents:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("agents must be a non-empty mapping of member names")
    if len(agents) > MAX_PARALLEL_MEMBERS:
        raise ConfigurationError(f"a parallel run takes at most {MAX_PARALLEL_MEMBERS} members")
    for name in agents:
        check_wire_id(name, "member name", limit=MAX_MEMBER_NAME_LENGTH)
    if threads is not None:
        if not isinstance(threads, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("threads must be a mapping of member names")
        if any(name not in agents for name in threads):
            raise ConfigurationError("threads names a member that is not in agents")


def build_members(
    parallel_id: str,
    agents: Mapping[str, Any],
    options: CallOptions,
    *,
    context: Any,
    threads: Mapping[str, object] | None,
    default_model: str,
) -> dict[str, BuiltCall]:
    """Build every member's call with the shared builder, before anything is staged.

    Each member gets `context` as its input, its own Thread (from `threads`, else the
    shared `thread`, else the one its prompt binds), a generation id derived from the
    parallel id, and the composition that names its parent.

    Raises:
        ConfigurationError | ThreadError: As `Runtime.generate`, for any member.
    """
    parent = parallel_workflow_id(parallel_id)
    built: dict[str, BuiltCall] = {}
    for name, agent in agents.items():
        member = dataclasses.replace(
            options,
            prompt=agent,
            input=context,
            thread=(threads or {}).get(name, options.thread),
            generation_id=parallel_member_generation_id(parallel_id, name),
        )
        call = member.build(default_model)
        composition = CompositionSpec(parent_workflow_id=parent, member=name)
        built[name] = dataclasses.replace(
            call, request=call.request.model_copy(update={"composition": composition})
        )
    return built


async def run_parallel(
    client: Client,
    task_queue: str,
    parallel_id: str,
    calls: Mapping[str, BuiltCall],
    *,
    hydrate: Callable[[Finished], Awaitable[Generation]],
) -> ParallelRun:
    """Start (or attach to) the parent workflow of staged calls and collect each result.

    Raises:
        ConfigurationError: The parent rejected its input.
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
    )
    try:
        outcome = await handle.result()
    except WorkflowFailureError as failure:
        raise domain_error(failure) from None
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
            results[member.name] = await hydrate(finished)
        except ThreadError as error:
            # The member's Thread was deleted since: that member's error, nobody else's.
            results[member.name] = error
    return ParallelRun(id=parallel_id, workflow_id=workflow_id, results=results)


def start_payload(parallel_id: str, calls: Mapping[str, BuiltCall]) -> dict[str, Any]:
    """The parent's start payload: each member's compact, ids-only generation input.

    Raises:
        ConfigurationError: The input is invalid as a whole (duplicate names, say).
    """
    payload: dict[str, Any] = {
        "parallel_id": parallel_id,
        "members": [
            {"name": name, "generation": call.request.start_payload()}
            for name, call in calls.items()
        ],
    }
    # Validated here too, so a defect is refused before anything starts.
    try:
        ParallelInput.model_validate(payload)
    except ValidationError as error:
        raise ConfigurationError(f"invalid parallel input: {describe_invalid(error)}") from None
    return payload


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
