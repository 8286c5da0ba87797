"""A required summary that cannot be prepared: `REPRESENTATION_UNAVAILABLE`, its cause kept.

The seed's error table: "`RequestCompositionError: REPRESENTATION_UNAVAILABLE` — a required
summary cannot be prepared or accessed". When the summary model's provider refuses the
support calls, the request fails so, before anything is sent for the turn, with the
provider's failure as a content-free cause: typed (`__cause__`) through `Runtime`, and in
the failure details (`diagnostics.cause`) for a plain Temporal client.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

import crux
from crux.errors import ProviderHTTPError, ProviderResponseError, RequestCompositionError
from crux.models import (
    GenerationInput,
    GenerationOutcome,
    HistorySpec,
    InputBudgetSpec,
    workflow_id_for,
)
from providers.loopback import ErrorReply, LoopbackOpenAIServer, Reply, TextReply
from providers.loopback._server import RecordedRequest
from providers.loopback._shared import echo_text
from tests.helpers import new_worker, settings_for
from vocabulary.details import decode_details

MODEL = "openai:gpt-4o-mini"
SUMMARY_MARK = "faithful, compact summaries"
CANARY = "canary-3f9a-summary-refusal"


class RefusingSummaries:
    """Answers summary calls with `reply`, everything else with an echo."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.summary_calls = 0
        self.main_calls = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        messages: list[dict[str, Any]] = (request.body or {}).get("messages") or []
        if messages and SUMMARY_MARK in str(messages[0].get("content")):
            self.summary_calls += 1
            return self.reply
        self.main_calls += 1
        return TextReply(text=echo_text(messages))


async def _long_thread(pool: asyncpg.Pool) -> str:
    thread_id = f"unprepared-{uuid.uuid4().hex[:8]}"
    conversation = crux.thread(id=thread_id, storage=pool)
    for turn in range(8):
        filler = " ".join(f"crate{turn}-{i}" for i in range(20))
        await conversation.append(
            [
                {"role": "user", "content": f"Question {turn}: {filler}"},
                {"role": "assistant", "content": f"Answer {turn}: {filler}"},
            ]
        )
    return thread_id


MANAGED = HistorySpec(kind="managed", messages=2)


async def test_a_refused_summary_fails_the_facade_call_typed_with_its_cause(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = RefusingSummaries(ErrorReply(status=400, message=f"no {CANARY}"))
    thread_id = await _long_thread(pool)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            with pytest.raises(RequestCompositionError) as raised:
                await worker.runtime.generate(
                    "What did we settle on?",
                    thread=thread_id,
                    model=MODEL,
                    history=MANAGED,
                    input_budget={"max": 300},
                )
    error = raised.value
    assert error.code == "REPRESENTATION_UNAVAILABLE"
    assert "summary" in str(error) and CANARY not in str(error)
    cause: Any = error.diagnostics["cause"]
    assert cause == {
        "type": "ProviderHTTPError",
        "code": "invalid_request_error",
        "provider": "openai",
        "status": 400,
        "host": cause["host"],
        "model": MODEL,
    }
    assert CANARY not in repr(error.diagnostics)
    # The provider's failure is the typed cause, rebuilt from those details alone.
    assert isinstance(error.__cause__, ProviderHTTPError)
    assert error.__cause__.status == 400 and error.__cause__.model == MODEL
    assert CANARY not in str(error.__cause__)
    assert responder.summary_calls == 1  # a 400 is not retried
    assert responder.main_calls == 0  # nothing was sent for the turn


async def test_a_plain_client_reads_the_cause_in_the_failure_details(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = RefusingSummaries(TextReply(text="   "))  # an empty summary: unusable
    thread_id = await _long_thread(pool)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            request = GenerationInput(
                generation_id="g1",
                thread_id=thread_id,
                model=MODEL,
                input="What did we settle on?",
                history=MANAGED,
                input_budget=InputBudgetSpec(max=300),
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await client.execute_workflow(
                    "ManagedGenerationWorkflow",
                    request,
                    id=workflow_id_for("g1", thread_id),
                    task_queue=worker.task_queue,
                    result_type=GenerationOutcome,
                )
            with pytest.raises(RequestCompositionError) as facade:
                await worker.runtime.generate(
                    "What did we settle on?",
                    thread=thread_id,
                    model=MODEL,
                    history=MANAGED,
                    input_budget={"max": 300},
                )
    failure = failed.value.cause
    assert isinstance(failure, ApplicationError)
    assert failure.type == "RequestCompositionError" and failure.non_retryable
    details = decode_details(failure.details, failure.type)
    assert details.code == "REPRESENTATION_UNAVAILABLE"
    assert details.diagnostics["cause"]["type"] == "ProviderResponseError"
    assert details.diagnostics["cause"]["provider"] == "openai"
    assert isinstance(facade.value.__cause__, ProviderResponseError)
    assert responder.main_calls == 0
    assert await pool.fetchval("SELECT count(*) FROM crux_derived_artifacts") == 0
