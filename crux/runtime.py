"""`Runtime`: the typed caller-side facade over the generation workflow.

`generate()` renders the prompt on the caller's side, stages the rendered turn (and any
call-site messages) in PostgreSQL, starts `ManagedGenerationWorkflow` with ids only, waits,
and reads the final text back from PostgreSQL. Temporal never sees message text.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

import asyncpg
from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)

from contracts.generation import (
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_STORAGE_WAIT_SECONDS,
    GenerationInput,
    GenerationResult,
    HistorySpec,
    InputBudgetSpec,
    request_fingerprint,
)
from crux._outcomes import (
    Generation,
    StreamCommitted,
    StreamDelta,
    StreamReset,
    StreamUpdate,
    await_result,
)
from crux._preview import preview_skeleton
from crux.prompts import Prompt, normalise_messages
from crux.prompts import prompt as define_prompt
from planner import ModelCatalog, Preview, RequestInspection, RequestReceipt
from planner import preview as plan_preview
from providers import TokenCounter
from storage import GenerationStore, SummaryStore, ThreadStore
from storage.generations import STREAM_CHANNEL
from storage.threads._validate import check_storable
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    check_wire_id,
    generation_key,
    workflow_id_for,
)
from vocabulary.messages import Message
from vocabulary.settings import Settings
from vocabulary.staging import StagingKind, context_kind
from workflows._decode import describe_invalid
from workflows._planning import build_plan_request, max_input_tokens

WORKFLOW_NAME = "ManagedGenerationWorkflow"

_STAGE = SearchAttributeKey.for_keyword("CruxStage")
_THREAD = SearchAttributeKey.for_keyword("CruxThreadId")
_GENERATION = SearchAttributeKey.for_keyword("CruxGenerationId")
_MODEL = SearchAttributeKey.for_keyword("CruxModel")


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
    ) -> None:
        self._client = client
        self._pool = pool
        self._task_queue = task_queue
        self._default_model = default_model
        self._search_attributes = search_attributes
        self._generations = GenerationStore(pool)
        self._threads = ThreadStore(pool)
        self._catalog = catalog or ModelCatalog.default()

    @classmethod
    def from_settings(cls, client: Client, pool: asyncpg.Pool, settings: Settings) -> Runtime:
        """Build a runtime with the task queue and default model of `settings`."""
        return cls(
            client, pool, task_queue=settings.task_queue, default_model=settings.default_model
        )

    async def generate(
        self,
        prompt: Prompt | str,
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
    ) -> Generation:
        """Run one managed generation and wait for its committed result.

        Args:
            prompt: A `Prompt`, or a plain string used as the user message.
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

        Raises:
            RequestCompositionError: The request cannot fit with authorised losses.
            ThreadError: The Thread rejected the operation (for example `identity_conflict`).
            ThreadCommitError: The turn could not be published; no success is reported.
        """
        request = await self._stage_request(
            prompt,
            input=input,
            thread=thread,
            model=model,
            messages=messages,
            generation_id=generation_id,
            history=history,
            input_budget=input_budget,
            max_output_tokens=max_output_tokens,
            owner=owner,
            tool_choice=tool_choice,
            max_tool_rounds=max_tool_rounds,
            on_revision_moved=on_revision_moved,
            storage_wait_seconds=storage_wait_seconds,
        )
        result = await self.run(request)
        return await self._hydrate(result)

    async def _stage_request(
        self,
        prompt: Prompt | str,
        *,
        input: Any,
        thread: object | None,
        model: str | None,
        messages: Sequence[Message | Mapping[str, Any]] | None,
        generation_id: str | None,
        history: HistorySpec | None,
        input_budget: Mapping[str, int] | InputBudgetSpec | None,
        max_output_tokens: int | None,
        owner: str,
        tool_choice: Literal["auto", "required", "none"] | None,
        max_tool_rounds: int,
        on_revision_moved: Literal["replan", "fail"],
        storage_wait_seconds: int,
        stream: bool = False,
    ) -> GenerationInput:
        """Render the prompt here, stage its text in PostgreSQL, return the ids-only input.

        Everything is validated before anything is written: the request (a
        `ConfigurationError`), the text (`ThreadError("invalid_message")` for text PostgreSQL
        cannot store) and the generation id's identity (`ThreadError("identity_conflict")`
        when the id was used for a different request in the same scope).
        """
        if isinstance(prompt, str):
            text = prompt
            prompt = define_prompt(id="crux.inline", prompt=lambda _input: text)
        if not isinstance(prompt, Prompt):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("prompt must be a crux.prompt(...) or a string")
        thread_id = _thread_id(thread) or prompt.thread_id
        generation_id = f"gen_{uuid.uuid4().hex}" if generation_id is None else generation_id
        check_wire_id(generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH)
        if thread_id is not None:
            check_wire_id(thread_id, "thread_id", limit=MAX_SCOPE_ID_LENGTH)
        key = generation_key(generation_id, thread_id)
        request = validated_input(
            generation_id=generation_id,
            thread_id=thread_id,
            model=model or self._default_model,
            prompt_id=prompt.id,
            input_ref=key,
            # Call-site messages shadow prompt-level messages, which shadow the Thread.
            messages_ref=key if messages is not None or prompt.messages is not None else None,
            owner=owner,
            history=history or prompt.history,
            input_budget=_merge_budget(prompt.input_budget, input_budget),
            max_output_tokens=max_output_tokens,
            contributors=[c.spec for c in prompt.contexts],
            tools=[t.name for t in prompt.tools],
            tool_choice=tool_choice,
            max_tool_rounds=max_tool_rounds,
            on_revision_moved=on_revision_moved,
            storage_wait_seconds=storage_wait_seconds,
            stream=stream,
        )
        rendered = Message(
            id=f"gen:{generation_id}:user", role="user", content=prompt.render(input)
        )
        staged: list[tuple[str, Message]] = [(StagingKind.USER, rendered)]
        if prompt.system:
            staged.append(("system", Message(role="system", content=prompt.system)))
        for contributor in prompt.contexts:
            for source_id, source_text in contributor.texts.items():
                staged.append(
                    (context_kind(source_id), Message(role="system", content=source_text))
                )
        caller = None if messages is None else _normalise(messages)
        declared = list(prompt.messages) if caller is None and prompt.messages is not None else None
        for _, message in staged:
            check_storable(message, thread_id=thread_id)
        for message in [*(caller or ()), *(declared or ())]:
            check_storable(message, thread_id=thread_id)
        fingerprint = request_fingerprint(
            request,
            [
                *([kind, message.model_dump(mode="json")] for kind, message in staged),
                *([m.model_dump(mode="json") for m in caller] if caller is not None else []),
                *(
                    [["prompt-messages", m.model_dump(mode="json")] for m in declared]
                    if declared is not None
                    else []
                ),
            ],
        )
        claimed, stored = await self._generations.claim_identity(
            key, fingerprint, thread_id=thread_id
        )
        if stored != fingerprint:
            raise ThreadError(
                "identity_conflict",
                "this generation_id was already used with a different request",
                thread_id=thread_id,
            )
        if not claimed and await self._generations.find_result(key) is not None:
            # A completed generation asked again: the workflow replays its stored result;
            # staging its text again would only leave rows nobody drops.
            return request
        for kind, message in staged:
            await self._generations.stage(key, 0, kind, message, thread_id=thread_id)
        if caller is not None:
            await self._generations.stage_messages(
                key, StagingKind.CALLER_MESSAGES, caller, thread_id=thread_id
            )
        elif declared is not None:
            await self._generations.stage_messages(
                key, "prompt-messages", declared, thread_id=thread_id
            )
        return request

    async def stream(
        self,
        prompt: Prompt | str,
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
    ) -> AsyncGenerator[StreamUpdate]:
        """Run a managed generation, yielding provider text as it arrives.

        Deltas are progress, not history: a `StreamReset` means a new provider attempt
        started (discard the text so far), and only the final `StreamCommitted` (after the
        turn is published) carries the accepted result. Arguments are those of `generate`.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: As `generate`.
        """
        request = await self._stage_request(
            prompt,
            input=input,
            thread=thread,
            model=model,
            messages=messages,
            generation_id=generation_id,
            history=history,
            input_budget=input_budget,
            max_output_tokens=max_output_tokens,
            owner=owner,
            tool_choice=tool_choice,
            max_tool_rounds=max_tool_rounds,
            on_revision_moved=on_revision_moved,
            storage_wait_seconds=storage_wait_seconds,
            stream=True,
        )
        handle = await self._start(request)
        outcome = asyncio.ensure_future(await_result(handle))
        wake = asyncio.Event()

        key = generation_key(request.generation_id, request.thread_id)

        def on_notify(_connection: object, _pid: int, _channel: str, payload: object) -> None:
            if payload == key:
                wake.set()

        connection = await self._pool.acquire()
        await connection.add_listener(STREAM_CHANNEL, on_notify)
        try:
            last = ""
            current: str | None = None
            while True:
                finished = outcome.done()
                for delta_key, text in await self._generations.deltas_after(key, last):
                    stream_id, _, _ = delta_key.rpartition(":")
                    if current is not None and stream_id != current:
                        yield StreamReset(attempt=int(stream_id.split(":")[0]))
                    current, last = stream_id, delta_key
                    yield StreamDelta(text=text)
                if finished:
                    break
                wake.clear()
                waiter = asyncio.ensure_future(wake.wait())
                await asyncio.wait(
                    {outcome, waiter},
                    timeout=STREAM_POLL_SECONDS,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
            result = outcome.result()
        finally:
            if not outcome.done():
                outcome.cancel()
            await connection.remove_listener(STREAM_CHANNEL, on_notify)
            await self._pool.release(connection)
        yield StreamCommitted(generation=await self._hydrate(result))

    async def _start(self, request: GenerationInput) -> WorkflowHandle[Any, GenerationResult]:
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
            request,
            id=workflow_id,
            task_queue=self._task_queue,
            result_type=GenerationResult,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=attributes,
            static_summary=f"generation {request.generation_id}",
            # When a worker for this task queue runs in this process, its first task
            # starts without a round trip through the server.
            request_eager_start=True,
        )

    async def run(self, request: GenerationInput) -> GenerationResult:
        """Start (or attach to) the workflow for `request` and wait for its result.

        Raises:
            RequestCompositionError | ThreadError | ThreadCommitError: Typed failures.
        """
        return await await_result(await self._start(request))

    async def receipt(self, request_id: str) -> RequestReceipt:
        """Return the stored receipt of a request, from any process and after restarts.

        Raises:
            KeyError: No receipt is stored under `request_id`.
        """
        receipt, _ = await self._generations.get_receipt(request_id)
        return RequestReceipt.model_validate(receipt)

    async def inspect(self, request: RequestReceipt | str) -> RequestInspection:
        """Return the full content-free inspection of a request (`receipt.inspect()`).

        Inspections are stored in PostgreSQL beside the receipts, so this works from any
        process and after restarts.

        Args:
            request: A receipt or a request id.

        Raises:
            KeyError: No inspection is stored for that request.
        """
        request_id = request if isinstance(request, str) else request.id
        _, inspection = await self._generations.get_receipt(request_id)
        if inspection is None:
            raise KeyError(request_id)
        return RequestInspection.model_validate(inspection)

    async def preview(
        self,
        prompt: Prompt | str,
        *,
        input: Any = None,
        thread: object | None = None,
        model: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        history: HistorySpec | None = None,
        input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
        max_output_tokens: int | None = None,
        owner: str = "main",
    ) -> Preview:
        """Tell whether a generation would fit, without side effects.

        Reads the Thread (one exact revision) and counts tokens in memory; never calls a
        provider, prepares a summary, or writes anything (not even token counts).

        Returns:
            `status` is `fits`, `unknown` (only an unprepared summary or a runtime source
            could make it fit) or `over-limit`; an over-limit request is returned, not
            raised.
        """
        if isinstance(prompt, str):
            prompt = define_prompt(id="crux.inline", prompt=prompt)
        model_id = model or self._default_model
        profile = self._catalog.resolve(model_id)
        counter = TokenCounter.for_encoding(profile.encoding)
        thread_id = _thread_id(thread) or prompt.thread_id
        request = validated_input(
            generation_id="preview",
            thread_id=thread_id,
            model=model_id,
            prompt_id=prompt.id,
            owner=owner,
            history=history or prompt.history,
            input_budget=_merge_budget(prompt.input_budget, input_budget),
            max_output_tokens=max_output_tokens,
            contributors=[c.spec for c in prompt.contexts],
            tools=[t.name for t in prompt.tools],
        )
        transcript = prompt.messages if messages is None else _normalise(messages)
        read = await preview_skeleton(
            prompt,
            input,
            request,
            counter,
            messages=None if transcript is None else list(transcript),
            ceiling=max_input_tokens(profile, request),
            threads=self._threads,
            summaries=SummaryStore(self._pool),
        )
        plan_request = build_plan_request(
            request_id=f"preview_{uuid.uuid4().hex}",
            request=request,
            read=read,
            profile=profile,
            ceiling=None,
            previous_request_id=None,
        )
        return plan_preview(plan_request)

    async def _hydrate(self, result: GenerationResult) -> Generation:
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
        return Generation(text=message.text, message=message, result=result)


def _normalise(messages: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    return list(normalise_messages(messages))


STREAM_POLL_SECONDS = 0.25
"""Followers re-check staged deltas at least this often, notifications or not."""


def _thread_id(thread: object | None) -> str | None:
    if thread is None:
        return None
    if isinstance(thread, str):
        return thread
    identifier = getattr(thread, "id", None)
    if isinstance(identifier, str):
        return identifier
    raise ConfigurationError("thread must be a Thread handle or an id")


def _merge_budget(
    base: InputBudgetSpec | None, override: Mapping[str, int] | InputBudgetSpec | None
) -> InputBudgetSpec | None:
    if override is None:
        return base
    if not isinstance(override, InputBudgetSpec):
        if not isinstance(override, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("input_budget must be a mapping of optimize_at and max")
        try:
            override = InputBudgetSpec.model_validate(dict(override))
        except ValidationError as error:
            raise ConfigurationError(f"invalid input_budget: {describe_invalid(error)}") from None
    if base is None:
        return override
    # Field by field: the invocation wins where it speaks.
    try:
        return InputBudgetSpec(
            optimize_at=(
                override.optimize_at if override.optimize_at is not None else base.optimize_at
            ),
            max=override.max if override.max is not None else base.max,
        )
    except ValidationError as error:
        raise ConfigurationError(f"invalid input_budget: {describe_invalid(error)}") from None


def validated_input(**fields: Any) -> GenerationInput:
    """Build a `GenerationInput`, raising a content-free `ConfigurationError` if invalid.

    Raises:
        ConfigurationError: Names the invalid fields and the kind of each defect.
    """
    try:
        return GenerationInput(**fields)
    except ValidationError as error:
        raise ConfigurationError(f"invalid generation request: {describe_invalid(error)}") from None
