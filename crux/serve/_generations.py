"""`/v1/generations` and `/v1/staged-inputs`: running generations and reading their replies.

Two ways to run a generation, both keeping message text out of Temporal history:

- over HTTP: `POST /v1/generations` runs it and answers with the reply (`/stream` sends it
  as server-sent events);
- from any Temporal client: `POST /v1/staged-inputs` stages the user turn and answers with
  the `input_ref` and ids to pass to `start_workflow`; once the run completed,
  `GET /v1/generations/{id}` reads the reply.

An ad-hoc generation's reply (one without a Thread) is kept until it is read: the run
endpoints erase it once they returned it, and `DELETE /v1/generations/{id}` erases it for
a client that read it with `GET`. Unread replies are swept with the staging retention.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import StreamingResponse

from activities import stored_output
from contracts.generation import GenerationResult
from crux.runtime import Generation
from crux.serve._deps import Scope, Services, Shared
from crux.serve._errors import ERROR_RESPONSES, NotFoundError
from crux.serve._models import GenerateRequest, GenerationReply, StagedInput, StageRequest
from crux.serve._sse import sse_stream
from crux.serve._staging import stage_turn
from crux.serve._tenancy import Scoped, TenantScope
from vocabulary.ids import MAX_SCOPE_ID_LENGTH
from vocabulary.messages import Message

router = APIRouter(tags=["generations"], responses=ERROR_RESPONSES)

_OPTIONS = ("model", "history", "input_budget", "max_output_tokens", "settings")


def _scoped(scope: TenantScope, body: GenerateRequest) -> Scoped:
    generation_id = body.generation_id or f"gen_{uuid.uuid4().hex}"
    return scope.generation(generation_id, body.thread_id)


def _options(scoped: Scoped, body: GenerateRequest) -> dict[str, Any]:
    options: dict[str, Any] = {
        "generation_id": scoped.generation_id,
        "thread": scoped.thread_id,
    }
    if body.messages is not None:
        options["messages"] = body.messages
    for name in _OPTIONS:
        value = getattr(body, name)
        if value is not None:
            options[name] = value
    return options


def _reply(
    scope: TenantScope,
    result: GenerationResult,
    message: Message | None,
) -> GenerationReply:
    thread_id = scope.external_thread(result.thread_id)
    generation_id = scope.external_generation(result.generation_id, result.thread_id)
    return GenerationReply(
        generation_id=generation_id,
        thread_id=thread_id,
        text=message.text if message is not None else None,
        message=message,
        result=result.model_copy(update={"generation_id": generation_id, "thread_id": thread_id}),
    )


async def _returned(
    shared: Services, scope: TenantScope, scoped: Scoped, generation: Generation
) -> GenerationReply:
    """The reply of a run; an ad-hoc reply is erased once it is in the response."""
    reply = _reply(scope, generation.result, generation.message)
    if scoped.thread_id is None:
        await shared.generations.erase_reply(scoped.key)
    return reply


@router.post("/v1/staged-inputs", summary="Stage a user turn for a plain Temporal client")
async def stage_input(body: StageRequest, scope: Scope, shared: Shared) -> StagedInput:
    """Stage the turn in PostgreSQL; answer with what to pass to `start_workflow`.

    Start `ManagedGenerationWorkflow` with id `workflow_id`, conflict policy
    `USE_EXISTING`, and an input made of `start` plus any other `GenerationInput` field
    (`model`, `history`, ...): the message text never enters Temporal history.
    """
    return await stage_turn(
        shared.generations, scope.generation(body.generation_id, body.thread_id), body
    )


@router.post("/v1/generations", summary="Run a generation and wait for its reply")
async def generate(body: GenerateRequest, scope: Scope, shared: Shared) -> GenerationReply:
    """Run one managed generation (staged, started by id, awaited) and answer the reply.

    The same `generation_id` again returns the same turn (`result.replayed`), never a
    second one.
    """
    scoped = _scoped(scope, body)
    generation = await shared.runtime.generate(body.message, **_options(scoped, body))
    return await _returned(shared, scope, scoped, generation)


@router.post(
    "/v1/generations/stream",
    summary="Run a generation, streaming its reply as server-sent events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "The events"}},
)
async def stream(
    body: GenerateRequest,
    scope: Scope,
    shared: Shared,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", min_length=1, max_length=64)
    ] = None,
) -> StreamingResponse:
    """Events `delta`, `reset`, `committed` or `error` (see the API guide).

    To resume, send the same body (same `generation_id`) with `Last-Event-ID`.
    """
    scoped = _scoped(scope, body)
    updates = shared.runtime.stream(body.message, **_options(scoped, body))
    # Read up to the first update here, so that a refused request is an HTTP error.
    first = await anext(updates)

    async def reply(generation: Generation) -> GenerationReply:
        return await _returned(shared, scope, scoped, generation)

    return StreamingResponse(
        sse_stream(first, updates, reply=reply, last_event_id=last_event_id, close=updates.aclose),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/v1/generations/{generation_id:path}", summary="Read a completed generation")
async def read_generation(
    generation_id: str,
    scope: Scope,
    shared: Shared,
    thread_id: Annotated[str | None, Query(min_length=1, max_length=MAX_SCOPE_ID_LENGTH)] = None,
) -> GenerationReply:
    """The result and reply of a completed generation, however it was started.

    `text` is `null` when the reply is no longer stored (redacted, or an ad-hoc reply
    erased). A generation still running (or never started) answers 404.
    """
    scoped = scope.generation(generation_id, thread_id)
    result = await shared.generations.find_result(scoped.key)
    if result is None:
        raise NotFoundError
    message = await stored_output(result, threads=shared.threads, generations=shared.generations)
    return _reply(scope, result, message)


@router.delete(
    "/v1/generations/{generation_id:path}",
    status_code=204,
    summary="Erase an ad-hoc generation's reply",
)
async def erase_generation(generation_id: str, scope: Scope, shared: Shared) -> Response:
    """Erase the reply an ad-hoc generation keeps until it is read (idempotent).

    A Thread's generation keeps its reply in the Thread: redact it there.
    """
    scoped = scope.generation(generation_id, None)
    if await shared.generations.find_result(scoped.key) is None:
        raise NotFoundError
    await shared.generations.erase_reply(scoped.key)
    return Response(status_code=204)
