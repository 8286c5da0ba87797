"""`preview()` is the run's first plan: one read path sizes both, so their figures agree."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

import crux
from contracts.activities import ReadRequestInput, ReadRequestResult
from crux._preview import preview_read
from crux._request import CallBuilder
from crux._staging import stage_call
from crux._worker import worker_resources
from planner import ModelCatalog, Preview, RequestReceipt
from providers.loopback import LoopbackOpenAIServer
from storage import GenerationStore, SummaryStore, ThreadStore
from tests.helpers import grow_thread, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"
TOPIC = "The quarterly logistics review covered warehouse capacity, carrier contracts and "
SYSTEM = "You are the depot planning assistant."
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


async def _weather(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"city": arguments["city"], "forecast": "sunny"}


WEATHER = crux.tool(
    "get_weather", _weather, description="Forecast for a city", parameters=WEATHER_SCHEMA
)


def _figures(figures: Preview | RequestReceipt) -> dict[str, Any]:
    """What a preview promises about the first request, in the receipt's terms."""
    return {
        "model": figures.model,
        "input_tokens": figures.input_tokens,
        "max_input_tokens": figures.max_input_tokens,
        "measurement": figures.measurement,
        "adaptations": [
            (a.contributor, a.representation, a.source, a.full_tokens, a.selected_tokens)
            for a in figures.adaptations
        ],
        "warnings": sorted(w.code for w in figures.warnings),
    }


async def test_preview_equals_the_first_receipt_with_tools_context_and_managed_history(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"parity:{uuid.uuid4().hex[:6]}"
    assistant = crux.prompt(
        id="parity",
        system=SYSTEM,
        use=[
            crux.history(recent={"messages": 4}),
            crux.context("policy", "Depots restock on Mondays.", contract=True),
            WEATHER,
        ],
    )
    options: dict[str, Any] = {
        "thread": thread_id,
        "model": MODEL,
        "input_budget": {"max": 400},
    }
    async with new_worker(client, pool, settings, tools=[WEATHER]) as worker:
        runtime = worker.runtime
        await grow_thread(
            runtime,
            thread_id,
            MODEL,
            lambda turn: (
                f"{TOPIC} item number {turn} with its own details and numbers {turn * 17}."
            ),
        )
        # The first managed turn prepares the summary inline; the next one finds it ready.
        await runtime.generate(
            assistant, input="What did we decide?", generation_id="managed-0", **options
        )
        question = "And about carriers?"
        preview = await runtime.preview(assistant, input=question, **options)
        result = await runtime.generate(
            assistant, input=question, generation_id="managed-1", **options
        )
    receipt = result.steps[0].request
    assert preview.status == "fits"
    assert any(a.representation == "summary" for a in receipt.adaptations)
    assert _figures(preview) == _figures(receipt)
    # The summary's support calls are linked from the preview's read as from the run's.
    inspection = await runtime.inspect(receipt)
    assert inspection.support_requests


async def test_preview_equals_the_first_receipt_for_call_site_messages(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    messages = [
        {"role": "user", "content": f"{TOPIC} question {n}"}
        if n % 2 == 0
        else {"role": "assistant", "content": f"answer {n}"}
        for n in range(8)
    ]
    assistant = crux.prompt(id="parity-messages", system=SYSTEM, use=[WEATHER])
    async with new_worker(client, pool, settings, tools=[WEATHER]) as worker:
        preview = await worker.runtime.preview(
            assistant, input="Summarise.", messages=messages, model=MODEL
        )
        result = await worker.runtime.generate(
            assistant, input="Summarise.", messages=messages, model=MODEL
        )
    assert preview.status == "fits"
    assert _figures(preview) == _figures(result.steps[0].request)


def _comparable(read: ReadRequestResult) -> dict[str, Any]:
    # Counts the activity tokenized and stored are the preview's in-memory counts.
    return read.model_dump(mode="json", exclude={"counted_messages"})


async def test_preview_reads_what_the_read_activity_reads(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"parity-read:{uuid.uuid4().hex[:6]}"
    assistant = crux.prompt(
        id="parity-read",
        system=SYSTEM,
        use=[
            crux.history(recent={"messages": 4}),
            crux.context("policy", "Depots restock on Mondays.", contract=True),
            WEATHER,
        ],
    )
    async with new_worker(client, pool, settings, tools=[WEATHER]) as worker:
        await grow_thread(
            worker.runtime, thread_id, MODEL, lambda turn: f"{TOPIC} item number {turn}.", ids=None
        )
        await worker.runtime.generate(
            assistant, input="Prepare.", thread=thread_id, model=MODEL, input_budget={"max": 300}
        )
    call = CallBuilder("offline:echo").build(
        assistant,
        {"input": "Next?", "thread": thread_id, "model": MODEL, "input_budget": {"max": 300}},
    )
    catalog = ModelCatalog.default()
    profile = catalog.resolve(MODEL)
    previewed = await preview_read(
        call, profile, threads=ThreadStore(pool), summaries=SummaryStore(pool)
    )
    await stage_call(call, GenerationStore(pool))
    request = call.request
    read_input = ReadRequestInput(
        generation_id=request.generation_id,
        thread_id=request.thread_id,
        owner=request.owner,
        model=request.model,
        prompt_id=request.prompt_id,
        input_ref=request.input_ref,
        messages_ref=request.messages_ref,
        history=request.history,
        tools=request.tools,
        context_source_ids=list(call.turn.contexts),
        max_input_tokens=0,
        input_budget=request.input_budget,
        max_output_tokens=request.max_output_tokens,
        derive_ceiling=True,
    )
    async with worker_resources(settings, pool=pool, catalog=catalog, tools=[WEATHER]) as acts:
        read = await ActivityEnvironment().run(acts.read_request, read_input)
    # The summary goes by its id and size: its support calls (one per chunk of a long
    # prefix) are linked when a plan sending it is recorded, never carried by the read.
    assert read.summary is not None and read.summary.artifact_id
    assert not read.summary.support_request_ids and not read.summary.support_requests
    assert _comparable(previewed) == _comparable(read)
