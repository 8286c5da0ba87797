"""Summary preparation end to end: planned support calls, sharing, failures, system prefix."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

import crux
from crux._worker import build_worker, worker_resources
from crux.config import Settings
from crux.errors import ProviderResponseError
from crux.models import workflow_id_for
from crux.runtime import Generation, Runtime
from planner import ModelCatalog, ModelProfile, derive_budget
from providers.loopback import LoopbackOpenAIServer, Reply, TextReply
from providers.loopback._server import RecordedRequest
from providers.loopback._shared import echo_text, input_tokens_of
from tests.helpers import RunningWorker, closed_run, eventually, payload_text, settings_for

MODEL = "openai:gpt-4o-mini"
SUMMARY_MODEL = "openai:summary-small"
CUSTOM_MODEL = "openai:custom-small"
SYSTEM = "You are the depot planning assistant."
SUMMARY_MARK = "faithful, compact summaries"

SUMMARY_PROFILE = ModelProfile(
    id=SUMMARY_MODEL,
    provider="openai",
    context_window=1_400,
    default_output_reserve=200,
    confidence="estimated",
    encoding="o200k_base",
)
CUSTOM_PROFILE = ModelProfile(
    id=CUSTOM_MODEL,
    provider="openai",
    context_window=3_000,
    default_output_reserve=300,
    confidence="estimated",
    encoding="o200k_base",
)
CATALOG = ModelCatalog.default().with_profiles(SUMMARY_PROFILE, CUSTOM_PROFILE)


class Responder:
    """Summaries after `delay` seconds (or empty ones), echoes otherwise."""

    def __init__(self, *, delay: float = 0.0, empty: bool = False) -> None:
        self.delay = delay
        self.empty = empty
        self.summary_bodies: list[dict[str, Any]] = []
        self.main_bodies: list[dict[str, Any]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        body: dict[str, Any] = request.body or {}
        messages: list[dict[str, Any]] = body.get("messages") or []
        if messages and SUMMARY_MARK in str(messages[0].get("content")):
            self.summary_bodies.append(body)
            text = "" if self.empty else "Earlier: carriers renegotiated, depots restocked."
            return TextReply(text=text, delay_seconds=self.delay)
        self.main_bodies.append(body)
        return TextReply(text=echo_text(messages))


@asynccontextmanager
async def catalog_worker(
    client: Client, pool: asyncpg.Pool, settings: Settings
) -> AsyncGenerator[RunningWorker]:
    """A worker whose catalog holds custom profiles (the workflow must plan with them)."""
    task_queue = f"crux-test-{uuid.uuid4().hex[:10]}"
    settings = settings.model_copy(update={"task_queue": task_queue})
    async with worker_resources(settings, pool=pool, catalog=CATALOG) as activities:
        worker = build_worker(client, task_queue=task_queue, activities=activities)
        async with worker:
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            yield RunningWorker(task_queue=task_queue, settings=settings, runtime=runtime)


async def _thread_with_turns(pool: asyncpg.Pool, turns: int, words: int) -> str:
    thread_id = f"prep-{uuid.uuid4().hex[:8]}"
    thread = crux.thread(id=thread_id, storage=pool)
    await thread.append({"role": "system", "content": SYSTEM})
    for turn in range(turns):
        filler = " ".join(f"pallet{turn}-{i}" for i in range(words))
        await thread.append(
            [
                {"role": "user", "content": f"Question {turn}: {filler}"},
                {"role": "assistant", "content": f"Answer {turn}: {filler}"},
            ]
        )
    return thread_id


async def _running_summaries(client: Client, thread_id: str) -> int:
    query = "WorkflowType = 'SummaryWorkflow' AND ExecutionStatus = 'Running'"
    return len(
        [
            e
            async for e in client.list_workflows(query)
            if e.id.startswith(f"crux/summary/{thread_id}/")
        ]
    )


def _managed(model: str = SUMMARY_MODEL, **options: Any) -> crux.Prompt:
    return crux.prompt(
        id=f"prep-{uuid.uuid4().hex[:6]}",
        use=[crux.history(recent={"messages": 2}, summary={"model": model, **options})],
    )


async def test_support_calls_fit_the_summary_model_and_are_linked(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """A prefix larger than the summary model's window is chunked; every call is receipted."""
    responder = Responder()
    thread_id = await _thread_with_turns(pool, turns=14, words=40)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:
            result = await worker.runtime.generate(
                _managed(strategy="regenerate"),
                input="What did we decide?",
                thread=thread_id,
                model=MODEL,
                input_budget={"max": 400},
            )
            inspection = await worker.runtime.inspect(result.steps[0].request)
            run = await closed_run(client, workflow_id_for(result.generation_id, thread_id))
            events = (await run.fetch_history()).to_json_dict()
    # The read named where the summary ends (no id lookup ran), one activity started and
    # awaited its run, and none of the support calls it made crossed the turn's history.
    history, payloads = json.dumps(events), payload_text(events)
    assert "crux.resolve_history_ids" not in history
    assert history.count('"crux.await_summary"') == 1
    assert inspection.support_requests
    assert all(support.id not in payloads for support in inspection.support_requests)
    window = SUMMARY_PROFILE.context_window
    assert len(responder.summary_bodies) > 1  # chunked, then reduced
    for body in responder.summary_bodies:
        cap = body.get("max_completion_tokens") or body["max_tokens"]
        assert input_tokens_of(body) + cap <= window
    records = await pool.fetch(
        "SELECT receipt FROM crux_request_receipts WHERE thread_id = $1 AND inspection IS NULL",
        thread_id,
    )
    receipts = [dict(row["receipt"]) for row in records]
    for receipt in receipts:
        assert receipt["input_tokens"] <= receipt["max_input_tokens"]
        assert receipt["kind"] == "history-summary"
    listed = {record.id for record in inspection.support_requests}
    # The inline preparation was chunked and reduced; every call it made is listed (the
    # maintenance started after the response may add receipts of its own meanwhile).
    assert len(listed) > 1
    assert listed <= {receipt["id"] for receipt in receipts}
    assert listed <= set(inspection.linked_request_ids)
    # A support call's id is not a request receipt: a plain KeyError, no validation dump.
    support_id = next(iter(listed))
    with pytest.raises(KeyError) as missing:
        await Runtime(client, pool).receipt(support_id)
    assert missing.value.__cause__ is None and missing.value.__suppress_context__
    # The leading system prefix is sent first, before the summary, in every main request.
    sent = responder.main_bodies[-1]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert str(sent[1]["content"]).startswith("Summary of the earlier conversation")


async def test_the_workflow_plans_with_the_workers_catalog(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with LoopbackOpenAIServer(responder=Responder()) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:
            result = await worker.runtime.generate("Hello", model=CUSTOM_MODEL)
    expected = derive_budget(CUSTOM_PROFILE, None, output_reserve=None)
    receipt = result.steps[0].request
    assert receipt.max_input_tokens == expected.max
    assert (
        receipt.max_input_tokens
        != derive_budget(
            ModelCatalog.default().resolve(CUSTOM_MODEL), None, output_reserve=None
        ).max
    )


async def test_identical_preparations_share_one_set_of_support_calls(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Two generations needing the same summary at once: the second waits for the first."""
    responder = Responder(delay=1.5)
    thread_id = await _thread_with_turns(pool, turns=8, words=20)
    prompt = _managed(model=MODEL)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:

            async def turn(name: str) -> object:
                try:
                    return await worker.runtime.generate(
                        prompt,
                        input=f"Question from {name}",
                        thread=thread_id,
                        model=MODEL,
                        input_budget={"max": 300},
                        generation_id=name,
                    )
                except crux.ThreadError as error:
                    # Two turns raced on one head; which one lands is not this test's concern.
                    return error

            outcomes = await asyncio.gather(turn("first"), turn("second"))
            # Let maintenance started after the responses land before counting (visibility
            # lists a just-started child after a moment).
            await asyncio.sleep(1.0)
            await eventually(
                lambda: _running_summaries(client, thread_id), lambda n: n == 0, timeout=30
            )
    artifacts = await pool.fetchval(
        "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1", thread_id
    )
    # One support call per artifact: the inline summary both turns needed was paid once.
    assert artifacts >= 1
    assert len(responder.summary_bodies) == artifacts
    origins = [
        {w.code for w in outcome.steps[0].request.warnings}
        & {"HISTORY_SUMMARY_INLINE", "HISTORY_SUMMARY_JOINED"}
        for outcome in outcomes
        if isinstance(outcome, Generation)
    ]
    assert any(origins)
    # At most one of the two started the preparation; the other joined its run (or found
    # its artifact stored), paying nothing.
    assert sum("HISTORY_SUMMARY_INLINE" in codes for codes in origins) <= 1
    histories = [
        (await (await closed_run(client, workflow_id_for(name, thread_id))).fetch_history())
        for name in ("first", "second")
    ]
    # The preparation is awaited by an activity, which started its run or joined it.
    assert any("crux.await_summary" in history.to_json() for history in histories)


async def test_an_empty_summary_is_never_stored_and_fails_typed(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = Responder(empty=True)
    thread_id = await _thread_with_turns(pool, turns=8, words=20)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:
            with pytest.raises((crux.RequestCompositionError, WorkflowFailureError)) as raised:
                await asyncio.wait_for(
                    worker.runtime.generate(
                        _managed(model=MODEL),
                        input="Anything?",
                        thread=thread_id,
                        model=MODEL,
                        input_budget={"max": 300},
                        generation_id="empty-summary",
                    ),
                    timeout=60,
                )
    if isinstance(raised.value, crux.RequestCompositionError):
        # The summary is unavailable; the unusable reply is its cause.
        assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
        assert isinstance(raised.value.__cause__, ProviderResponseError)
    # Whatever the facade makes of it, the workflow itself failed typed and final.
    handle = client.get_workflow_handle(workflow_id_for("empty-summary", thread_id))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "RequestCompositionError"
    assert cause.non_retryable
    assert len(responder.summary_bodies) == 1  # never retried
    assert responder.main_bodies == []  # nothing was sent without the summary
    assert await pool.fetchval("SELECT count(*) FROM crux_derived_artifacts") == 0


async def test_history_recent_keeps_the_system_prefix_under_a_tight_max(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = Responder()
    thread_id = await _thread_with_turns(pool, turns=30, words=5)
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:
            await worker.runtime.generate(
                crux.prompt(id="recent", use=[crux.history.recent(messages=4)]),
                input="And now?",
                thread=thread_id,
                model=MODEL,
                input_budget={"max": 300},
            )
    sent = responder.main_bodies[-1]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user", "assistant", "user"]


async def test_history_recent_over_call_site_messages_keeps_questions_with_answers(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = Responder()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(6):
        messages.append({"role": "user", "content": f"Question {turn}"})
        messages.append({"role": "assistant", "content": f"Answer {turn}"})
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with catalog_worker(client, pool, settings) as worker:
            await worker.runtime.generate(
                crux.prompt(id="recent-calls", use=[crux.history.recent(messages=3)]),
                input="And now?",
                model=MODEL,
                messages=messages,
            )
    sent = responder.main_bodies[-1]["messages"]
    # The cap of 3 keeps the newest whole turn: never an answer without its question.
    assert sent == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Question 5"},
        {"role": "assistant", "content": "Answer 5"},
        {"role": "user", "content": "And now?"},
    ]
