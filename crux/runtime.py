"""`Runtime`: the typed caller-side facade over the generation workflow.

`generate()` renders the prompt on the caller's side, stages the rendered turn (and any
call-site messages) in PostgreSQL, starts `ManagedGenerationWorkflow` with ids only, waits,
and reads the final text back from PostgreSQL. Temporal never sees message text.

The runtime is composed of parts, each built here with what it needs and nothing else: the
call builder, the workflow starter, the reader of stored results, the previewer, the
parallel runner, the operator controls and the approval decisions. Its methods delegate.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from types import TracebackType
from typing import Any, Self, Unpack

import asyncpg
from temporalio.client import Client

from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS, PendingApproval
from contracts.generation import GenerationInput, GenerationResult
from contracts.operator import GenerationStatus
from contracts.settings import AttemptPolicySpec, as_attempt_policy
from crux._approvals import ToolApprovals
from crux._notices import CommitNotices
from crux._operator import RunOperator
from crux._outcomes import (
    Generation,
    StreamCommitted,
    StreamDelta,
    StreamReset,
    StreamUpdate,
    stored_result,
)
from crux._parallel import ParallelRun, ParallelRunner
from crux._preview import Previewer
from crux._request import CallBuilder, check_keywords
from crux._results import StoredResults, thread_id_of
from crux._staging import BuiltCall, stage_call
from crux._starter import GenerationStarter
from crux._streaming import STREAM_POLL_SECONDS, follow_deltas, missing_tail
from crux._waiting import RunWaiter, checked_timeout
from crux.agents import Agent
from crux.options import CallOptions, PreviewOptions, RunOptions
from crux.prompts import Prompt
from planner import ModelCatalog, Preview, RequestInspection, RequestReceipt
from storage import GenerationStore, SummaryStore, ThreadStore
from vocabulary.ids import generation_key
from vocabulary.settings import Settings

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

_CALL_KEYWORDS = CallOptions.__optional_keys__
_PREVIEW_KEYWORDS = PreviewOptions.__optional_keys__
_PARALLEL_KEYWORDS = RunOptions.__optional_keys__


class Runtime:
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
        eager_start: Start each run's first workflow task on a worker of this process, when
            one polls the task queue, without a round trip through the server. Turn it off
            when this process hosts a versioned worker (`CRUX_DEPLOYMENT_NAME`): an eagerly
            started run is taken by the local worker's build whatever the deployment's
            current version is. `crux.connect` turns it off when the settings name a
            deployment.
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
        eager_start: bool = True,
    ) -> None:
        self._client = client
        self._pool = pool
        self._task_queue = task_queue
        self._owns_pool = False  # `crux.connect` opened the pool: `close` closes it
        self._generations = GenerationStore(pool)
        threads = ThreadStore(pool)
        self._calls = CallBuilder(
            default_model,
            attempt_policy=as_attempt_policy(attempt_policy),
            approval_timeout=approval_timeout_seconds,
            catalog=catalog,
        )
        self._starter = GenerationStarter(
            client, task_queue, search_attributes=search_attributes, eager_start=eager_start
        )
        self._waiter = RunWaiter(client, task_queue)
        self._results = StoredResults(self._generations, threads)
        self._notices = CommitNotices(pool)
        self._previewer = Previewer(catalog or ModelCatalog.default(), threads, SummaryStore(pool))
        self._parallel = ParallelRunner(
            client,
            task_queue,
            calls=self._calls,
            generations=self._generations,
            results=self._results,
        )
        self._operator = RunOperator(client)
        self._approvals = ToolApprovals(client)

    @classmethod
    def from_settings(cls, client: Client, pool: asyncpg.Pool, settings: Settings) -> Runtime:
        """Build a runtime with the task queue and default model of `settings`."""
        return cls(
            client,
            pool,
            task_queue=settings.task_queue,
            default_model=settings.default_model,
            eager_start=settings.deployment_name is None,
        )

    @property
    def client(self) -> Client:
        """The Temporal client the runtime starts workflows with."""
        return self._client

    @property
    def pool(self) -> asyncpg.Pool:
        """The PostgreSQL pool (for `crux.thread(id=..., storage=runtime.pool)`)."""
        return self._pool

    async def generate(
        self, prompt: Prompt | Agent | str, **options: Unpack[CallOptions]
    ) -> Generation:
        """Run one managed generation and wait for its committed result.

        The call returns once the turn is committed. A run with nothing left to do after
        its commit (no success hooks, time budget, cache or managed history) answers from
        the commit's PostgreSQL notice, and its workflow closes a moment later.

        Args:
            prompt: A `Prompt`, a `crux.agent(...)` (its model, budget, history, tools,
                tool choice and hooks apply unless this call sets them), or a plain string
                used as the user message.
            **options: The call's options: `input`, `thread`, `model`, `generation_id`, ...
                (`crux.CallOptions` names and describes each).

        Raises:
            ConfigurationError: An invalid option, or a keyword `generate` does not take.
            NoWorkerError: No worker polls the task queue: raised within seconds, naming
                it and the command that starts a worker (the run is stopped).
            CallTimeoutError: `timeout=` seconds passed (the run is asked to cancel).
            RequestCompositionError: The request cannot fit with authorised losses.
            ThreadError: The Thread rejected the operation (for example `identity_conflict`).
            ThreadCommitError: The turn could not be published; no success is reported.
            OutputValidationError: The reply did not validate as `output`, after retries.
        """
        timeout = checked_timeout(options.get("timeout"))
        call, replay = await self._staged(prompt, options, "generate")
        async with self._notices.watching(call.request) as notice:
            handle = await self._starter.start(call.request, wait_seconds=timeout, replay=replay)
            finished = await self._waiter.result(handle, wait_seconds=timeout, notice=notice)
        return await self._results.finished(finished, call.output)

    async def stream(
        self, prompt: Prompt | Agent | str, **options: Unpack[CallOptions]
    ) -> AsyncGenerator[StreamUpdate]:
        """Run a managed generation, yielding provider text as it arrives.

        Deltas are progress, not history: a `StreamReset` means a new provider attempt
        started (discard the text so far), and only the final `StreamCommitted` (after the
        turn is published) carries the accepted result. Arguments are those of `generate`.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: As `generate`.
        """
        timeout = checked_timeout(options.get("timeout"))
        call, replay = await self._staged(prompt, options, "stream", stream=True)
        request = call.request
        key = generation_key(request.generation_id, request.thread_id)
        streamed = ""  # the current attempt's text as delivered so far
        async with self._notices.watching(request) as notice:
            handle = await self._starter.start(request, wait_seconds=timeout, replay=replay)
            outcome = asyncio.ensure_future(
                self._waiter.result(handle, wait_seconds=timeout, notice=notice)
            )
            following = follow_deltas(self._pool, self._generations, key, outcome)
            async with aclosing(following) as deltas:
                async for update in deltas:
                    streamed = streamed + update.text if isinstance(update, StreamDelta) else ""
                    yield update
        generation = await self._results.finished(outcome.result(), call.output)
        tail = missing_tail(streamed, generation.text)
        if tail:
            # The commit removes staged deltas; the last ones (or all of them) can go with
            # them before this follower read them. The committed text completes what was
            # streamed, so the deltas of a stream add up to the committed text.
            yield StreamDelta(text=tail)
        yield StreamCommitted(generation=generation)

    async def run(
        self, request: GenerationInput, *, wait_seconds: float | None = None
    ) -> GenerationResult:
        """Start (or attach to) the workflow for `request` and wait for its result.

        Args:
            request: The generation.
            wait_seconds: Seconds to wait (`CallOptions.timeout`); `None` waits without
                limit.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: Typed failures.
            NoWorkerError: No worker polls the task queue (the run was stopped).
            CallTimeoutError: `wait_seconds` passed (the run was asked to cancel).
        """
        wait_seconds = checked_timeout(wait_seconds)
        handle = await self._starter.start(request, wait_seconds=wait_seconds)
        finished = await self._waiter.result(handle, wait_seconds=wait_seconds)
        return await stored_result(self._generations, finished)

    async def read_generation(
        self, generation_id: str, *, thread: object | None = None, erase: bool = True
    ) -> Generation:
        """The result and reply text of a finished generation, from any process.

        What `generate` returns, for a generation started elsewhere (by a plain Temporal
        client, say, whose outcome holds only ids). The reply of a generation that
        committed to no Thread (ad hoc, or with call-site messages shadowing its Thread) is
        kept only for this read: it is erased once read, unless `erase=False`.

        Args:
            generation_id: The generation's id.
            thread: Its Thread (handle or id); omit for an ad-hoc generation.
            erase: Erase a reply that no Thread holds once it is read.

        Raises:
            ThreadError: `not_found` when no finished generation has that id, or its reply
                was erased.
            ConfigurationError: `generation_id` or `thread` is not an id.
        """
        return await self._results.read(generation_id, thread_id_of(thread), erase=erase)

    async def erase_generation(self, generation_id: str, *, thread: object | None = None) -> bool:
        """Erase the reply a finished generation keeps outside any Thread.

        `generate` and `stream` erase it once they read it; this erases one that was never
        read (a generation started by another client, or whose caller went away); the
        retention sweep deletes it after `CRUX_STAGING_RETENTION_SECONDS` otherwise. The
        content-free result stays: the id still answers as completed, and running it again
        raises `ThreadError` (`not_found`) instead of a second turn. A committed Thread turn
        is erased with the Thread's own `redact` or `delete` instead.

        Args:
            generation_id: The generation's id.
            thread: Its Thread (handle or id); omit for an ad-hoc generation.

        Returns:
            Whether a reply was erased.

        Raises:
            ConfigurationError: `generation_id` or `thread` is not an id.
        """
        return await self._results.erase(generation_id, thread_id_of(thread))

    async def preview(
        self, prompt: Prompt | Agent | str, **options: Unpack[PreviewOptions]
    ) -> Preview:
        """Tell whether a generation would fit, without side effects.

        Reads the Thread (one exact revision) and counts tokens in memory; never calls a
        provider, prepares a summary, or writes anything (not even token counts).

        Args:
            prompt: As `generate`.
            **options: The options of `generate` that shape the first plan
                (`crux.PreviewOptions`).

        Returns:
            `status` is `fits`, `unknown` (only an unprepared summary or a runtime source
            could make it fit) or `over-limit`; an over-limit request is returned, not
            raised.
        """
        check_keywords(options, _PREVIEW_KEYWORDS, "Runtime.preview")
        return await self._previewer.preview(self._calls.build(prompt, CallOptions(**options)))

    async def parallel(
        self,
        *,
        id: str,
        agents: Mapping[str, Prompt | Agent | str],
        context: Any = None,
        threads: Mapping[str, object] | None = None,
        **options: Unpack[RunOptions],
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
            threads: Member name -> Thread handle or id; the others use the `thread`
                option, else the Thread their prompt binds. Members on one Thread each
                commit their own turn.
            **options: As `generate`, for every member (`crux.RunOptions`); a member
                agent's own `output` applies when `output` is unset.

        Raises:
            ConfigurationError: An invalid id, member name or option (before anything runs).
            ThreadError: `identity_conflict` when the id was used with other content.
            NoWorkerError: No worker polls the task queue (the run is stopped).
            CallTimeoutError: `timeout=` seconds passed (the run and its members are
                asked to cancel).
        """
        check_keywords(options, _PARALLEL_KEYWORDS, "Runtime.parallel")
        return await self._parallel.run(id, agents, options, context=context, threads=threads)

    async def receipt(self, request_id: str) -> RequestReceipt:
        """Return the stored receipt of a request, from any process and after restarts.

        Raises:
            KeyError: No request receipt is stored under `request_id` (support calls of
                summaries keep their own receipts, listed in the inspection).
            ConfigurationError: `request_id` is not a request id (not a string, empty,
                over-long, or holding control characters or unstorable text).
        """
        return await self._results.receipt(request_id)

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
        return await self._results.inspection(request)

    async def generation_status(self, run: str, *, thread: str | None = None) -> GenerationStatus:
        """The content-free status of a generation run.

        Args:
            run: A workflow id (`crux/gen/...`) or a generation id.
            thread: The Thread of a generation id (omit for an ad-hoc generation).

        Raises:
            OperatorError: `not_found` when there is no such run.
            ConfigurationError: `run` or `thread` is not an id.
        """
        return await self._operator.generation_status(run, thread=thread)

    async def retry_generation(self, run: str, *, thread: str | None = None) -> str:
        """Make a run waiting for storage (or for its commit) try again at once.

        Returns:
            The stage the run was in (`commit_blocked` or `storage_blocked`).

        Raises:
            OperatorError: `not_found`, or `wrong_stage` when the run is not waiting.
        """
        return await self._operator.retry_generation(run, thread=thread)

    async def abandon_generation(self, run: str, *, thread: str | None = None) -> str:
        """Give up a run waiting for storage or for its commit.

        Nothing is committed, the staged output is discarded, and the run's caller gets
        `ThreadCommitError` with code `abandoned`.

        Returns:
            The stage the run was in.

        Raises:
            OperatorError: `not_found`, or `wrong_stage` when the run is not waiting.
        """
        return await self._operator.abandon_generation(run, thread=thread)

    async def pending_approvals(
        self,
        generation_id: str | None = None,
        *,
        thread: object | None = None,
        workflow_id: str | None = None,
    ) -> list[PendingApproval]:
        """The tool calls a run waits on for a decision: tool name and call id, no arguments.

        Name the run by `generation_id` (with its `thread`) or by `workflow_id`.
        """
        return await self._approvals.pending(generation_id, thread=thread, workflow_id=workflow_id)

    async def approve(
        self,
        call_id: str,
        generation_id: str | None = None,
        *,
        thread: object | None = None,
        workflow_id: str | None = None,
    ) -> None:
        """Let a pending tool call run.

        Raises:
            ConfigurationError: The run does not wait on that call (or on any).
        """
        await self._approvals.decide(
            call_id, generation_id, thread=thread, workflow_id=workflow_id, approve=True
        )

    async def deny(
        self,
        call_id: str,
        generation_id: str | None = None,
        *,
        thread: object | None = None,
        workflow_id: str | None = None,
        reason_code: str | None = None,
    ) -> None:
        """Deny a pending call: it never runs; the model sees `{"error":"denied",...}`.

        `reason_code` is a short identifier the model sees (`denied` when omitted).

        Raises:
            ConfigurationError: An invalid reason code, or the run does not wait on that call.
        """
        await self._approvals.decide(
            call_id,
            generation_id,
            thread=thread,
            workflow_id=workflow_id,
            approve=False,
            reason_code=reason_code,
        )

    async def close(self) -> None:
        """Release what the runtime owns: the pool `crux.connect` opened (idempotent).

        A runtime built from the caller's own pool leaves it open: the caller closes it.
        The connection that listens for commits goes back to the pool either way. The
        Temporal client holds no resources that need closing.
        """
        await self._notices.close()
        if self._owns_pool and not self._pool.is_closing():
            await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _staged(
        self,
        prompt: Prompt | Agent | str,
        options: CallOptions,
        method: str,
        *,
        stream: bool = False,
    ) -> tuple[BuiltCall, bool]:
        """Build the call and stage its text: options, text and identity are checked first.

        Returns:
            The call, and whether its generation completed before (`stage_call`).
        """
        check_keywords(options, _CALL_KEYWORDS, f"Runtime.{method}")
        call = self._calls.build(prompt, options, stream=stream)
        return call, await stage_call(call, self._generations)
