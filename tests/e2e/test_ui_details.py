"""What an operator sees in the Temporal UI, read back from the real dev server.

Every generation's static summary names its kind, model and Thread; its details on completion
give tokens, attempts, adaptations and commit status; a SummaryWorkflow carries the Crux
search attributes (found by filtering on `CruxThreadId`) and ends with an accurate stage. None
of it holds content.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

import crux
from crux.errors import CruxError
from crux.models import workflow_id_for
from providers.loopback import ErrorReply, LoopbackOpenAIServer, TextReply
from tests.helpers import (
    closed_run,
    eventually,
    grow_thread,
    new_worker,
    settings_for,
    workflow_metadata,
)
from vocabulary.ids import member_workflow_id, parallel_workflow_id

MODEL = "openai:gpt-4o-mini"
CANARY = "canary-7f3a9c-private"
TOPIC = "The quarterly logistics review covered warehouse capacity, carrier contracts and "


async def _current_details(handle: WorkflowHandle[Any, Any]) -> str:
    metadata = await workflow_metadata(handle)
    return metadata.current_details


async def _visible(handle: WorkflowHandle[Any, Any]) -> tuple[str, str, str, dict[str, object]]:
    described = await handle.describe()
    attributes = {key.name: value for key, value in described.typed_search_attributes}
    return (
        await described.static_summary() or "",
        await described.static_details() or "",
        await _current_details(handle),
        attributes,
    )


async def test_a_generation_names_its_kind_model_and_thread_and_ends_with_its_figures(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"ui:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text=f"answer {CANARY}"))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            f"question {CANARY}", thread=thread_id, model=MODEL, generation_id="ui-gen-1"
        )
        handle = await closed_run(client, workflow_id_for("ui-gen-1", thread_id))
        summary, details, current, _ = await _visible(handle)

        updates = []
        async for update in worker.runtime.stream(
            f"streamed {CANARY}", thread=thread_id, model=MODEL, generation_id="ui-stream-1"
        ):
            updates.append(update)
        streamed = await closed_run(client, workflow_id_for("ui-stream-1", thread_id))
        stream_summary, _, stream_current, _ = await _visible(streamed)

    assert summary == f"generate · {MODEL} · thread {thread_id}"
    assert "generation: ui-gen-1" in details
    assert f"thread: {thread_id}" in details
    usage = result.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert current.splitlines() == [
        "stage: completed",
        f"tokens: {usage.input_tokens} in, {usage.output_tokens} out",
        "attempts: 1, tool rounds: 0, replans: 0",
        "adaptations: 0",
        "commit: selected",
    ]
    assert stream_summary == f"stream · {MODEL} · thread {thread_id}"
    assert stream_current.startswith("stage: completed\n")
    assert "commit: selected" in stream_current
    for text in (summary, details, current, stream_summary, stream_current):
        assert CANARY not in text


async def test_parallel_members_name_their_member_and_a_failure_names_its_error_type(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    suffix = uuid.uuid4().hex[:6]
    parallel_id = f"ui-par-{suffix}"
    thread_id = f"ui-par:{suffix}"
    openai_server.enqueue(TextReply(text="one answer"))
    async with new_worker(client, pool, settings) as worker:
        run = await worker.runtime.parallel(
            id=parallel_id,
            context={"question": CANARY},
            agents={
                "critic": crux.prompt(id="critic", prompt=lambda i: f"critic: {i['question']}")
            },
            threads={"critic": thread_id},
            model=MODEL,
        )
        assert run["critic"].thread_commit is not None
        member = client.get_workflow_handle(
            member_workflow_id(parallel_workflow_id(parallel_id), "critic")
        )
        summary, details, current, _ = await _visible(member)

        openai_server.enqueue(ErrorReply(status=401, message=f"bad key {CANARY}"))
        failed_id = f"ui-fail-{suffix}"
        try:
            await worker.runtime.generate(
                f"fails {CANARY}", thread=thread_id, model=MODEL, generation_id=failed_id
            )
        except (CruxError, WorkflowFailureError) as error:
            failure = error
        else:
            raise AssertionError("the generation should have failed")
        failed = client.get_workflow_handle(workflow_id_for(failed_id, thread_id))
        failed_current = await _current_details(failed)

    assert summary == f"parallel member critic · {MODEL} · thread {thread_id}"
    assert f"parent: {parallel_workflow_id(parallel_id)}" in details
    assert current.startswith("stage: completed\n")
    assert type(failure).__name__ != "AssertionError"
    lines = failed_current.splitlines()
    assert lines[0] == "stage: failed"
    assert lines[1].startswith("error: Provider")
    for text in (summary, details, current, failed_current):
        assert CANARY not in text


async def test_a_summary_workflow_carries_the_crux_attributes_and_ends_completed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"ui-sum:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await grow_thread(
            worker.runtime,
            thread_id,
            MODEL,
            lambda turn: f"{TOPIC} item {turn} {CANARY} with numbers {turn * 17}.",
        )
        result = await worker.runtime.generate(
            crux.prompt(id="managed", use=[crux.history(recent={"messages": 4})]),
            input="What did we decide about carriers?",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
            generation_id="ui-managed",
        )
        assert [a.representation for a in result.steps[0].request.adaptations] == ["summary"]
        managed = client.get_workflow_handle(workflow_id_for("ui-managed", thread_id))
        managed_current = await _current_details(managed)

        # Filtering on the Thread finds its summary runs too.
        async def summaries() -> list[str]:
            query = f"WorkflowType = 'SummaryWorkflow' AND CruxThreadId = '{thread_id}'"
            return [execution.id async for execution in client.list_workflows(query)]

        [summary_id] = await eventually(summaries, lambda ids: len(ids) == 1)
        handle = client.get_workflow_handle(summary_id)
        summary, details, current, _ = await _visible(handle)
        attributes = await eventually(
            lambda: _visible(handle), lambda seen: seen[3].get("CruxStage") == "completed"
        )

    assert "adaptations: 1 (summary)" in managed_current.splitlines()
    assert summary == f"inline summary · {MODEL} · thread {thread_id}"
    assert "for generation: ui-managed" in details
    lines = current.splitlines()
    assert lines[0] == "stage: completed"
    assert lines[1].startswith("summary: prepared, ")
    found = attributes[3]
    assert found["CruxThreadId"] == thread_id
    assert found["CruxGenerationId"] == "ui-managed"
    assert found["CruxModel"] == MODEL
    for text in (summary, details, current, managed_current, *map(str, found.values())):
        assert CANARY not in text
