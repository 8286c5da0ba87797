"""History-source precedence, source diagnostics, preview of tools and frozen shapes, end to end.

Call-site messages > prompt-level messages > the Thread's selected path > none; arrays are
never merged, shadowing leaves the Thread untouched and is logged with its reason.
"""

from __future__ import annotations

import json
import logging
import uuid

import asyncpg
import pytest
from temporalio.client import Client

from crux.errors import ThreadError
from crux.logs import configure_logging
from crux.models import GenerationOutcome, GenerationResult, ThreadCommit, workflow_id_for
from crux.prompts import history, prompt
from crux.thread import thread
from crux.tools import tool
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import grow_thread, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"
PROMPT_TRANSCRIPT = [
    {"id": "p1", "role": "user", "content": "Prompt-level question."},
    {"id": "p2", "role": "assistant", "content": "Prompt-level answer."},
]


def _sent(server: LoopbackOpenAIServer) -> list[list[str]]:
    return [
        [str(m.get("content")) for m in request.body["messages"]]
        for request in server.requests
        if request.body
    ]


def _events(output: str, name: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for line in output.splitlines():
        if name not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == name:
            found.append(record)
    return found


async def test_prompt_messages_shadow_the_thread_and_call_site_messages_shadow_both(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"sources:{uuid.uuid4().hex[:6]}"
    conversation = thread(id=thread_id, storage=pool)
    seeded = prompt(id="seeded", use=[conversation], messages=PROMPT_TRANSCRIPT)
    openai_server.enqueue(
        TextReply(text="on the thread"), TextReply(text="from prompt"), TextReply(text="call")
    )
    configure_logging(log_format="json", level="info")
    try:
        async with new_worker(client, pool, settings) as worker:
            await worker.runtime.generate("kept", thread=thread_id, model=MODEL)
            revision = (await ThreadStore(pool).read_history_view(thread_id)).revision
            by_prompt = await worker.runtime.generate(seeded, input="second", model=MODEL)
            by_call = await worker.runtime.generate(
                seeded,
                input="third",
                model=MODEL,
                messages=[{"role": "user", "content": "Call-site only."}],
            )
        captured = capfd.readouterr()
    finally:
        logging.getLogger().setLevel(logging.WARNING)

    sent = _sent(openai_server)
    # Prompt-level messages replace the Thread's path; nothing of the Thread is sent.
    assert sent[1] == ["Prompt-level question.", "Prompt-level answer.", "second"]
    # Call-site messages replace the prompt's: arrays are never merged.
    assert sent[2] == ["Call-site only.", "third"]
    for result in (by_prompt, by_call):
        assert result.thread_commit is None
        assert result.result.history_source == "caller-messages"
    assert (await ThreadStore(pool).read_history_view(thread_id)).revision == revision

    overrides = _events(captured.out + captured.err, "thread.history.override")
    reasons = [(e["reason"], e["shadowed"], e["messages"]) for e in overrides]
    assert reasons == [("prompt-messages", "thread", 2), ("explicit-messages", "thread", 1)]
    output = captured.out + captured.err
    assert "Prompt-level question" not in output and "Call-site only" not in output


async def test_a_registered_prompt_with_messages_serves_plain_temporal_clients(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"registered:{uuid.uuid4().hex[:6]}"
    registered = prompt(id="registered-seeded", messages=PROMPT_TRANSCRIPT)
    openai_server.enqueue(TextReply(text="plain client"))
    async with new_worker(client, pool, settings, prompts=[registered]) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": "r1",
                "thread_id": thread_id,
                "prompt_id": "registered-seeded",
                "model": MODEL,
                "input": "from a plain client",
            },
            id=workflow_id_for("r1", thread_id),
            task_queue=worker.task_queue,
        )
    result = GenerationOutcome.model_validate(raw)
    assert result.history_source == "caller-messages"
    assert result.thread_commit is None
    assert _sent(openai_server)[0] == [
        "Prompt-level question.",
        "Prompt-level answer.",
        "from a plain client",
    ]


async def test_a_projection_without_a_source_is_receipted_not_silent(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    recent = prompt(id="recent-nowhere", use=[history.recent()])
    openai_server.enqueue(TextReply(text="alone"), TextReply(text="with thread"))
    async with new_worker(client, pool, settings) as worker:
        lonely = await worker.runtime.generate(recent, input="hello", model=MODEL)
        bound = await worker.runtime.generate(
            recent, input="hello", model=MODEL, thread=f"src:{uuid.uuid4().hex[:6]}"
        )
        preview = await worker.runtime.preview(recent, input="hello", model=MODEL)
    codes = [w.code for w in lonely.steps[0].request.warnings]
    assert "HISTORY_SOURCE_MISSING" in codes
    assert "HISTORY_SOURCE_MISSING" not in [w.code for w in bound.steps[0].request.warnings]
    assert "HISTORY_SOURCE_MISSING" in [w.code for w in preview.warnings]
    assert lonely.steps[0].request.summary_path is None


async def test_preview_measures_tool_schemas_like_the_run(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    lookup = tool(
        "order_lookup",
        lambda arguments: "found",
        description="Look an order up by its number and return its shipping state.",
        parameters={
            "type": "object",
            "properties": {"order": {"type": "string", "description": "The order number."}},
            "required": ["order"],
        },
    )
    bare = prompt(id="bare")
    tooled = prompt(id="tooled", use=[lookup])
    openai_server.enqueue(TextReply(text="answered"))
    async with new_worker(client, pool, settings, tools=[lookup]) as worker:
        without = await worker.runtime.preview(bare, input="Where is order 7?", model=MODEL)
        with_tools = await worker.runtime.preview(tooled, input="Where is order 7?", model=MODEL)
        ran = await worker.runtime.generate(tooled, input="Where is order 7?", model=MODEL)
    assert without.input_tokens is not None and with_tools.input_tokens is not None
    assert with_tools.input_tokens > without.input_tokens + 20
    assert with_tools.input_tokens == ran.steps[0].request.input_tokens


async def test_returned_receipts_and_views_are_deeply_frozen(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"frozen:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="frozen reply"))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate("freeze", thread=thread_id, model=MODEL)
    commit = result.thread_commit
    assert commit is not None
    assert isinstance(commit.message_ids, tuple)
    assert isinstance(result.result.steps, tuple) and isinstance(result.steps, tuple)
    view = await thread(id=thread_id, storage=pool).history()
    assert isinstance(view.messages, tuple) and isinstance(view.message_ids, tuple)
    assert all(isinstance(entry.tool_call_ids, tuple) for entry in view.messages)
    snapshot = await thread(id=thread_id, storage=pool).read()
    assert isinstance(snapshot.entries, tuple)
    # Tuples serialise as JSON arrays and validate back to equal values.
    assert ThreadCommit.model_validate_json(commit.model_dump_json()) == commit
    wire = json.loads(result.result.model_dump_json())
    assert isinstance(wire["thread_commit"]["message_ids"], list)
    assert GenerationResult.model_validate(wire) == result.result


async def test_the_receipt_says_the_portable_summary_path_ran(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"native:{uuid.uuid4().hex[:6]}"
    topic = "The logistics review covered warehouse capacity and carrier contracts, item"
    receipts = []
    async with new_worker(client, pool, settings) as worker:
        await grow_thread(
            worker.runtime,
            thread_id,
            MODEL,
            lambda turn: f"{topic} {turn} with figures {turn * 17}.",
            ids=None,
        )
        # Native summaries allowed (the default), then forbidden: the adapters offer no
        # native compaction, so the portable path runs either way, and the receipt says so.
        for allowed in (True, False):
            managed = prompt(
                id=f"managed-{allowed}",
                use=[history(recent={"messages": 4}, provider_native=allowed)],
            )
            result = await worker.runtime.generate(
                managed,
                input="What did we decide about carriers?",
                thread=thread_id,
                model=MODEL,
                input_budget={"max": 250},
            )
            receipts.append(result.steps[0].request)
    for receipt in receipts:
        assert any(a.representation == "summary" for a in receipt.adaptations)
        assert receipt.summary_path == "portable"


async def test_a_plain_client_recent_policy_without_caps_keeps_twenty_messages(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    transcript = [
        {"id": f"m{n}", "role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"}
        for n in range(30)
    ]
    registered = prompt(id="long-transcript", messages=transcript)
    openai_server.enqueue(TextReply(text="recent only"))
    async with new_worker(client, pool, settings, prompts=[registered]) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": "recent-default",
                "prompt_id": "long-transcript",
                "model": MODEL,
                "input": "latest question",
                "history": {"kind": "recent"},
            },
            id=workflow_id_for("recent-default", None),
            task_queue=worker.task_queue,
        )
    result = GenerationOutcome.model_validate(raw)
    assert result.history_source == "caller-messages"
    assert _sent(openai_server)[0] == [f"turn {n}" for n in range(10, 30)] + ["latest question"]


async def test_unstorable_prompt_level_messages_are_refused_before_anything_starts(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    broken = prompt(id="broken", messages=[{"role": "user", "content": "nul \x00 inside"}])
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(ThreadError) as raised:
            await worker.runtime.generate(broken, input="hello", model=MODEL)
    assert raised.value.code == "invalid_message"
    assert openai_server.requests == []
