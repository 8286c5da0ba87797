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
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy

from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from contracts.decoding import describe_invalid
from contracts.generation import (
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_STORAGE_WAIT_SECONDS,
    CompositionSpec,
    HistorySpec,
    InputBudgetSpec,
)
from contracts.parallel import (
    MAX_PARALLEL_MEMBERS,
    MemberFailure,
    ParallelInput,
    ParallelOutcome,
)
from contracts.settings import AttemptPolicySpec, ModelSettingsSpec
from crux._outcomes import Finished, Generation, domain_error, rebuild_error
from crux._request import BuiltCall, CallOptions, stage_call
from crux.agents import Agent
from crux.output import Output
from crux.prompts import Prompt
from storage import GenerationStore
from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    GenerationFailedError,
    OutputValidationError,
    ThreadError,
)
from vocabulary.ids import (
    MAX_MEMBER_NAME_LENGTH,
    MAX_PARALLEL_ID_LENGTH,
    check_wire_id,
    parallel_member_generation_id,
    parallel_workflow_id,
)

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


class ParallelRuns:
    """`Runtime.parallel`, kept beside the rest of the parallel facade."""

    _client: Client
    _task_queue: str
    _default_model: str
    _generations: GenerationStore
    _attempt_policy: AttemptPolicySpec | None
    _approval_timeout: int | None

    async def _load(self, finished: Finished, output: Output | None) -> Generation:
        """The hydrated generation of a finished member (provided by `Runtime`)."""
        raise NotImplementedError

    async def parallel(
        self,
        *,
        id: str,
        agents: Mapping[str, Prompt | Agent | str],
        context: Any = None,
        thread: object | None = None,
        threads: Mapping[str, object] | None = None,
        model: str | None = None,
        history: HistorySpec | None = None,
        input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
        max_output_tokens: int | None = None,
        owner: str = "main",
        tool_choice: Literal["auto", "required", "none"] | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        on_revision_moved: Literal["replan", "fail"] = "replan",
        storage_wait_seconds: int = DEFAULT_STORAGE_WAIT_SECONDS,
        settings: ModelSettingsSpec | Mapping[str, Any] | None = None,
        attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None = None,
        output: Output | type[BaseModel] | Mapping[str, Any] | None = None,
    ) -> ParallelRun:
        """Run several members at once, each a managed generation of its own.

        Each member is a child `ManagedGenerationWorkflow` (`crux/parallel/<id>/<member>`)
        of one `ParallelGenerationWorkflow`, built by the same call builder as `generate`.
        One member's failure is that member's typed error in the result, never losing the
        others' committed turns; the same `id` again returns the same results (committed
        members replay, nothing commits twice).

        Args:
            id: The run's id and idempotency key; member generation ids are `<id>/<member>`.
            agents: Member name -> prompt, `crux.agent(...)` (its defaults and hooks apply;
                `prepare_invocation` runs once per member) or a plain string.
            context: The input every member's prompt renders.
            thread: The Thread of every member unless `threads` names one or its prompt
                binds one; members on one Thread each commit their own turn.
            threads: Member name -> Thread handle or id.
            model: `provider:model` for every member.
            history: As `generate`, for every member; so are the remaining options.
            input_budget: As `generate`.
            max_output_tokens: As `generate`.
            owner: As `generate`.
            tool_choice: As `generate`.
            max_tool_rounds: As `generate`.
            on_revision_moved: As `generate`.
            storage_wait_seconds: As `generate`.
            settings: As `generate`.
            attempt_policy: As `generate`.
            output: As `generate`: every member's structured output (a member agent's own
                `output` applies when this is `None`); `result[name].output` is typed.

        Raises:
            ConfigurationError: An invalid id, member name or option (before anything runs).
            ThreadError: `identity_conflict` when the id was used with other content.
        """
        check_members(id, agents, threads)
        options = CallOptions.of({**locals(), "prompt": "", "generation_id": None})
        calls = build_members(
            id,
            agents,
            options,
            context=context,
            threads=threads,
            default_model=self._default_model,
            default_attempt_policy=self._attempt_policy,
            default_approval_timeout=self._approval_timeout,
        )
        start_payload(id, calls)  # validates the whole before anything is staged
        for call in calls.values():
            await stage_call(call, self._generations)
        return await run_parallel(
            self._client,
            self._task_queue,
            id,
            calls,
            hydrate=self._load,
        )


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
    default_attempt_policy: AttemptPolicySpec | None = None,
    default_approval_timeout: int | None = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
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
        call = member.build(
            default_model,
            default_attempt_policy=default_attempt_policy,
            default_approval_timeout=default_approval_timeout,
        )
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
    hydrate: Callable[[Finished, Output | None], Awaitable[Generation]],
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
            call = calls.get(member.name)
            results[member.name] = await hydrate(finished, call.output if call else None)
        except (ThreadError, OutputValidationError) as error:
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
