"""`Runtime`: the typed caller-side facade over the generation workflow.

`generate()` renders the prompt on the caller's side, stages the rendered turn (and any
call-site messages) in PostgreSQL, starts `ManagedGenerationWorkflow` with ids only, waits,
and reads the final text back from PostgreSQL. Temporal never sees message text.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

import asyncpg
from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)

from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from contracts.generation import (
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_STORAGE_WAIT_SECONDS,
    GenerationInput,
    GenerationResult,
    HistorySpec,
    InputBudgetSpec,
)
from contracts.settings import AttemptPolicySpec, ModelSettingsSpec, as_attempt_policy
from contracts.ui import generation_details, generation_summary
from crux._approvals import ApprovalMethods
from crux._lifecycle import RuntimeLifecycle
from crux._operator import OperatorRuns
from crux._outcomes import (
    Finished,
    Generation,
    StreamCommitted,
    StreamDelta,
    StreamReset,
    StreamUpdate,
    await_result,
    stored_result,
)
from crux._parallel import ParallelRun, ParallelRuns
from crux._preview import preview_call
from crux._request import BuiltCall, CallOptions, stage_call
from crux._streaming import STREAM_POLL_SECONDS, follow_deltas
from crux.agents import Agent
from crux.output import Output
from crux.prompts import Prompt
from planner import ModelCatalog, Preview, RequestInspection, RequestReceipt
from storage import GenerationStore, SummaryStore, ThreadStore
from vocabulary.errors import ThreadError
from vocabulary.ids import check_wire_id, generation_key, workflow_id_for
from vocabulary.messages import Message
from vocabulary.settings import Settings
from vocabulary.staging import StagingKind

__all__ = [
    "STREAM_POLL_SECONDS",
    "Generation",
    "ParallelRun",
    "Runtime",
    "StreamCommitted",
    "StreamDelta",
    "StreamReset",
    "StreamUpdate",
]

WORKFLOW_NAME = "ManagedGenerationWorkflow"

_STAGE = SearchAttributeKey.for_keyword("CruxStage")
_THREAD = SearchAttributeKey.for_keyword("CruxThreadId")
_GENERATION = SearchAttributeKey.for_keyword("CruxGenerationId")
_MODEL = SearchAttributeKey.for_keyword("CruxModel")


class Runtime(ParallelRuns, OperatorRuns, ApprovalMethods, RuntimeLifecycle):
    """Runs managed generations on Temporal with PostgreSQL as the canonical store.

    Args:
        client: A Temporal client using the pydantic data converter.
        pool: An asyncpg pool on the Crux database.
        task_queue: The Crux worker's task queue.
        default_model: Model used when `generate` names none.
        search_attributes: Set Crux search attributes at start (they must be registered
            on the namespace; the embedded dev server registers them).
        catalog: Model capacity profiles for `preview` (the default catalog when omitted).
        attempt_policy: Retry and timeout of provider attempts for every call of this
            runtime (`AttemptPolicySpec` or a mapping); calls override it field by field.
            Today's values when omitted.
        approval_timeout_seconds: How long a call of a tool that requires approval waits
            for an operator's decision before it is denied with reason `timeout` (a day
            by default; `None` waits without limit). Calls may override it.
    """

    def __init__(
        self,
        client: Client,
        pool: asyncpg.Pool,
        *,
        task_queue: str = "crux",
        default_model: str = "offline:echo",
        search_attributes: bool = True,
        catalog: ModelCatalog | None = None,
        attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None = None,
        approval_timeout_seconds: int | None = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    ) -> None:
        self._client = client
        self._pool = pool
        self._task_queue = task_queue
        self._default_model = default_model
        self._search_attributes = search_attributes
        self._generations = GenerationStore(pool)
        self._threads = ThreadStore(pool)
        self._summaries = SummaryStore(pool)
        self._catalog = catalog or ModelCatalog.default()
        self._attempt_policy = as_attempt_policy(attempt_policy)
        self._approval_timeout = approval_timeout_seconds

    @classmethod
    def from_settings(cls, client: Client, pool: asyncpg.Pool, settings: Settings) -> Runtime:
        """Build a runtime with the task queue and default model of `settings`."""
        return cls(
            client, pool, task_queue=settings.task_queue, default_model=settings.default_model
        )

    async def generate(
        self,
        prompt: Prompt | Agent | str,
        *,
        input: Any = None,
        thread: object | None = None,
        model: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        generation_id: str | None = None,
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
        approval_timeout_seconds: int | None = None,
        output: Output | type[BaseModel] | Mapping[str, Any] | None = None,
    ) -> Generation:
        """Run one managed generation and wait for its committed result.

        Args:
            prompt: A `Prompt`, a `crux.agent(...)` (its model, budget, history, tools,
                tool choice and hooks apply unless this call sets them), or a plain string
                used as the user message.
            input: The prompt's input.
            thread: A Thread handle or id; overrides a Thread bound in `prompt.use`.
            model: `provider:model`; the runtime's default when omitted.
            messages: Call-site messages: they shadow the Thread for this call (it is neither
                read nor committed), exactly as the seed specifies.
            generation_id: Idempotency key: the same id yields one turn, however often it is
                started. A random id is used when omitted (not retry-safe).
            history: Request-history policy; overrides the prompt's.
            input_budget: `{"optimize_at": ..., "max": ...}`; merged over the prompt's.
            max_output_tokens: Output reserve for this call.
            owner: The Thread owner whose head is read and advanced.
            tool_choice: `auto`, `required` (first call) or `none` for the prompt's tools.
            max_tool_rounds: Tool rounds before a text answer is required.
            on_revision_moved: `replan` (default) re-reads the Thread and plans again when
                another turn landed before this call was sent; `fail` raises
                `ThreadError("identity_conflict")` instead, before any provider call.
            storage_wait_seconds: How long the run waits out a PostgreSQL outage before it
                fails with `StorageUnavailableError`.
            settings: Model settings for this call (`crux.model_settings(...)` or a
                mapping), merged field by field over the prompt's.
            attempt_policy: Retry and timeout of this call's provider attempts, merged
                field by field over the runtime's.
            approval_timeout_seconds: How long a call of a tool that requires approval
                waits for its decision before it is denied with reason `timeout`; the
                runtime's when omitted.
            output: Structured output (a pydantic model class, a JSON schema or
                `crux.output(...)`); replaces the agent's and the prompt's. The reply is
                validated before it is staged; a rejected reply is asked for again (a new
                planned call, reason `validation-retry`) up to its `max_retries`, then
                `OutputValidationError`. `Generation.output` is the typed value.

        Raises:
            RequestCompositionError: The request cannot fit with authorised losses.
            ThreadError: The Thread rejected the operation (for example `identity_conflict`).
            ThreadCommitError: The turn could not be published; no success is reported.
        """
        call = await self._stage_request(CallOptions.of(locals()))
        result = await self.run(call.request)
        return await self._hydrate(result, call.output)

    async def _stage_request(self, options: CallOptions, *, stream: bool = False) -> BuiltCall:
        """Render the prompt here, stage its text in PostgreSQL, return the built call.

        Everything is validated before anything is written: the request (a
        `ConfigurationError`), the text (`ThreadError("invalid_message")` for text PostgreSQL
        cannot store) and the generation id's identity (`ThreadError("identity_conflict")`
        when the id was used for a different request in the same scope).
        """
        call = options.build(
            self._default_model,
            stream=stream,
            default_attempt_policy=self._attempt_policy,
            default_approval_timeout=self._approval_timeout,
        )
        await stage_call(call, self._generations)
        return call

    async def stream(
        self,
        prompt: Prompt | Agent | str,
        *,
        input: Any = None,
        thread: object | None = None,
        model: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        generation_id: str | None = None,
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
        approval_timeout_seconds: int | None = None,
        output: Output | type[BaseModel] | Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[StreamUpdate]:
        """Run a managed generation, yielding provider text as it arrives.

        Deltas are progress, not history: a `StreamReset` means a new provider attempt
        started (discard the text so far), and only the final `StreamCommitted` (after the
        turn is published) carries the accepted result. Arguments are those of `generate`.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: As `generate`.
        """
        call = await self._stage_request(CallOptions.of(locals()), stream=True)
        request = call.request
        outcome = asyncio.ensure_future(await_result(await self._start(request)))
        key = generation_key(request.generation_id, request.thread_id)
        async with aclosing(follow_deltas(self._pool, self._generations, key, outcome)) as deltas:
            async for update in deltas:
                yield update
        result = await stored_result(self._generations, outcome.result())
        yield StreamCommitted(generation=await self._hydrate(result, call.output))

    async def _start(self, request: GenerationInput) -> WorkflowHandle[Any, Finished]:
        workflow_id = workflow_id_for(request.generation_id, request.thread_id)
        attributes = None
        if self._search_attributes:
            attributes = TypedSearchAttributes(
                [
                    SearchAttributePair(_STAGE, "starting"),
                    SearchAttributePair(_GENERATION, request.generation_id),
                    SearchAttributePair(_MODEL, request.model),
                    *(
                        [SearchAttributePair(_THREAD, request.thread_id)]
                        if request.thread_id
                        else []
                    ),
                ]
            )
        return await self._client.start_workflow(
            WORKFLOW_NAME,
            request.start_payload(),
            id=workflow_id,
            task_queue=self._task_queue,
            result_type=Finished,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=attributes,
            # What the Temporal UI lists: kind, model and Thread; the ids in the details.
            static_summary=generation_summary(request),
            static_details=generation_details(request),
            # When a worker for this task queue runs in this process, its first task
            # starts without a round trip through the server.
            request_eager_start=True,
        )

    async def run(self, request: GenerationInput) -> GenerationResult:
        """Start (or attach to) the workflow for `request` and wait for its result.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: Typed failures.
        """
        finished = await await_result(await self._start(request))
        return await stored_result(self._generations, finished)

    async def receipt(self, request_id: str) -> RequestReceipt:
        """Return the stored receipt of a request, from any process and after restarts.

        Raises:
            KeyError: No request receipt is stored under `request_id` (support calls of
                summaries keep their own receipts, listed in the inspection).
            ConfigurationError: `request_id` is not a request id (not a string, empty,
                over-long, or holding control characters or unstorable text).
        """
        receipt, _ = await self._generations.get_receipt(_request_id(request_id))
        try:
            return RequestReceipt.model_validate(receipt)
        except ValidationError:
            # Not a request receipt (a support call's): say so without quoting the row.
            raise KeyError(request_id) from None

    async def inspect(self, request: RequestReceipt | str) -> RequestInspection:
        """Return the full content-free inspection of a request (`receipt.inspect()`).

        Inspections are stored in PostgreSQL beside the receipts, so this works from any
        process and after restarts.

        Args:
            request: A receipt or a request id.

        Raises:
            KeyError: No inspection is stored for that request.
            ConfigurationError: `request` is neither a receipt nor a request id.
        """
        request_id = _request_id(request.id if isinstance(request, RequestReceipt) else request)
        _, inspection = await self._generations.get_receipt(request_id)
        if inspection is None:
            raise KeyError(request_id)
        return RequestInspection.model_validate(inspection)

    async def preview(
        self,
        prompt: Prompt | Agent | str,
        *,
        input: Any = None,
        thread: object | None = None,
        model: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        history: HistorySpec | None = None,
        input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
        max_output_tokens: int | None = None,
        owner: str = "main",
        settings: ModelSettingsSpec | Mapping[str, Any] | None = None,
        output: Output | type[BaseModel] | Mapping[str, Any] | None = None,
    ) -> Preview:
        """Tell whether a generation would fit, without side effects.

        Reads the Thread (one exact revision) and counts tokens in memory; never calls a
        provider, prepares a summary, or writes anything (not even token counts).

        Returns:
            `status` is `fits`, `unknown` (only an unprepared summary or a runtime source
            could make it fit) or `over-limit`; an over-limit request is returned, not
            raised.
        """
        call = CallOptions.of(locals()).build(self._default_model)
        return await preview_call(
            call, catalog=self._catalog, threads=self._threads, summaries=self._summaries
        )

    async def _load(self, finished: Finished, output: Output | None = None) -> Generation:
        return await self._hydrate(await stored_result(self._generations, finished), output)

    async def _hydrate(self, result: GenerationResult, output: Output | None = None) -> Generation:
        if result.thread_commit is not None and result.thread_id is not None:
            [message] = await self._threads.load_messages(
                result.thread_id, [result.output_message_id]
            )
        else:
            staged = await self._generations.get_staged(
                generation_key(result.generation_id, result.thread_id), 0, StagingKind.FINAL
            )
            if staged is None:
                raise ThreadError("not_found", "the generation's output is no longer stored")
            message = staged.message
        value = output.parse(message.text) if output is not None else None
        return Generation(text=message.text, message=message, result=result, output=value)


MAX_REQUEST_ID_LENGTH = 256
"""Longest request id looked up (the workflow's ids are far shorter)."""


def _request_id(value: object) -> str:
    """`value` if it can be a request id; a malformed one is refused before any query."""
    return check_wire_id(value, "request id", limit=MAX_REQUEST_ID_LENGTH)
