"""One managed turn end to end on real parts: Temporal, PostgreSQL, HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import asyncpg
import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from crux.errors import RequestCompositionError, ThreadError
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.prompts import history as crux_history
from crux.prompts import prompt
from crux.runtime import Runtime
from crux.stack import temporal_cli_path
from providers import TokenCounter
from providers.loopback import CountReply, ErrorReply, LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import closed_run, eventually, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"

QUESTIONS = (
    "Where is the Torre de Belem exactly?",
    "Is it open on Mondays in winter?",
    "How long should I plan for the visit?",
)
REPLIES = (
    "It stands on the river bank in the Belem district.",
    "It is closed on Mondays all year round.",
    "Plan for roughly ninety minutes including the queue.",
)


def _texts(server: LoopbackOpenAIServer) -> list[list[str]]:
    return [
        [str(m.get("content")) for m in request.body["messages"]]
        for request in server.requests
        if request.body
    ]


async def _history_json(client: Client, workflow_id: str) -> str:
    history: WorkflowHistory = await client.get_workflow_handle(workflow_id).fetch_history()
    return history.to_json()


async def test_three_turns_commit_one_causal_group_each_and_send_exact_history(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    support = prompt(
        id="support", system="Answer briefly.", prompt=lambda value: str(value["message"])
    )
    thread_id = f"support:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(*(TextReply(text=reply) for reply in REPLIES))
    async with new_worker(client, pool, settings) as worker:
        results = []
        for number, question in enumerate(QUESTIONS):
            result = await worker.runtime.generate(
                support,
                input={"message": question},
                thread=thread_id,
                model=MODEL,
                generation_id=f"turn-{number}",
            )
            results.append(result)

    assert [r.text for r in results] == list(REPLIES)
    commits = [r.thread_commit for r in results]
    assert all(c is not None and c.status == "selected" and not c.replayed for c in commits)
    assert commits[0] is not None and commits[0].parent_id is None
    for previous, current in zip(commits, commits[1:], strict=False):
        assert previous is not None and current is not None
        assert current.parent_id == previous.message_ids[-1]
    assert commits[0] is not None
    assert commits[0].message_ids == ("gen:turn-0:user", "gen:turn-0:assistant")

    sent = _texts(openai_server)
    assert sent[0] == ["Answer briefly.", QUESTIONS[0]]
    assert sent[2] == [
        "Answer briefly.",
        QUESTIONS[0],
        REPLIES[0],
        QUESTIONS[1],
        REPLIES[1],
        QUESTIONS[2],
    ]
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [m.id for m in view.messages][-2:] == ["gen:turn-2:user", "gen:turn-2:assistant"]
    assert len(view.messages) == 6

    receipt = results[2].steps[0].request
    assert receipt.input_tokens > 0
    assert await worker.runtime.receipt(receipt.id) == receipt


async def test_histories_carry_no_thread_text(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"private:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(*(TextReply(text=reply) for reply in REPLIES))
    async with new_worker(client, pool, settings) as worker:
        for number, question in enumerate(QUESTIONS):
            await worker.runtime.generate(
                question, thread=thread_id, model=MODEL, generation_id=f"p-{number}"
            )
    for number in range(len(QUESTIONS)):
        text = await _history_json(client, workflow_id_for(f"p-{number}", thread_id))
        for secret in (*QUESTIONS, *REPLIES):
            assert secret not in text
            assert json.dumps(secret)[1:-1] not in text


async def test_same_generation_id_twice_commits_one_turn(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"idem:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="first"), TextReply(text="second, never committed"))
    async with new_worker(client, pool, settings) as worker:
        first = await worker.runtime.generate(
            "hello", thread=thread_id, model=MODEL, generation_id="same"
        )
        second = await worker.runtime.generate(
            "hello", thread=thread_id, model=MODEL, generation_id="same"
        )
        both = await asyncio.gather(
            worker.runtime.generate("hi", thread=thread_id, model=MODEL, generation_id="race"),
            worker.runtime.generate("hi", thread=thread_id, model=MODEL, generation_id="race"),
        )
    assert first.text == second.text == "first"
    assert second.result.replayed is True
    assert first.thread_commit is not None and second.thread_commit is not None
    assert second.thread_commit.message_ids == first.thread_commit.message_ids
    assert both[0].thread_commit == both[1].thread_commit
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 4
    # One provider call per distinct generation id.
    assert len(openai_server.requests) == 2


async def test_plain_client_with_json_input_commits_a_turn(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"plain:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="plain reply"))
    async with new_worker(client, pool, settings) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": "g1", "thread_id": thread_id, "model": MODEL, "input": "Hi there"},
            id=workflow_id_for("g1", thread_id),
            task_queue=worker.task_queue,
        )
    result = GenerationOutcome.model_validate(raw)
    assert result.thread_commit is not None and result.thread_commit.status == "selected"
    [user, assistant] = await ThreadStore(pool).load_messages(
        thread_id, result.thread_commit.message_ids
    )
    assert (user.text, assistant.text) == ("Hi there", "plain reply")


async def test_temporal_cli_execute_with_json_input_commits_a_turn(
    temporal_env: WorkflowEnvironment,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
) -> None:
    client = temporal_env.client
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"cli:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="cli reply"))
    payload = json.dumps(
        {
            "generation_id": "c1",
            "thread_id": thread_id,
            "model": MODEL,
            "input": {"message": "From the CLI"},
        }
    )
    async with new_worker(client, pool, settings) as worker:
        completed = await asyncio.to_thread(
            subprocess.run,
            [
                temporal_cli_path(),
                "workflow",
                "execute",
                "--address",
                client.service_client.config.target_host,
                "--type",
                "ManagedGenerationWorkflow",
                "--task-queue",
                worker.task_queue,
                "--workflow-id",
                workflow_id_for("c1", thread_id),
                "--input",
                payload,
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 0, completed.stderr[-2000:]
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [m.id for m in view.messages] == ["gen:c1:user", "gen:c1:assistant"]


async def test_request_too_large_fails_typed_before_any_provider_call(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(RequestCompositionError) as raised:
            await worker.runtime.generate(
                "word " * 400,
                thread=f"big:{uuid.uuid4().hex[:6]}",
                model=MODEL,
                input_budget={"max": 50},
            )
    assert raised.value.code == "REQUEST_TOO_LARGE"
    assert "word" not in str(raised.value)
    # At most an authoritative count was asked; nothing was dispatched for generation.
    assert not [r for r in openai_server.requests if r.path.endswith("/chat/completions")]


async def test_retryable_provider_status_is_retried_by_temporal(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(
        ErrorReply(status=429, headers={"retry-after-ms": "50"}),
        ErrorReply(status=503),
        TextReply(text="third time lucky"),
    )
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "hello", thread=f"retry:{uuid.uuid4().hex[:6]}", model=MODEL
        )
    assert result.text == "third time lucky"
    assert len(openai_server.requests) == 3


async def test_adhoc_generation_without_thread_returns_text(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate("What is two plus two?", model="offline:echo")
    assert result.thread_commit is None
    assert result.text
    assert result.result.history_source == "none"


async def test_commit_blocked_is_visible_and_recovers(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"blocked:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="kept safe", delay_seconds=2.0))
    async with new_worker(client, pool, settings) as worker:
        request = GenerationInput(
            generation_id="b1", thread_id=thread_id, model=MODEL, input="keep me"
        )
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            request,
            id=workflow_id_for("b1", thread_id),
            task_queue=worker.task_queue,
            result_type=GenerationOutcome,
        )

        async def stage() -> str:
            return await handle.query("get_stage", result_type=str)

        await eventually(stage, lambda value: value == "invoking")
        # The stage says the call is scheduled; the request reaching the provider says the
        # attempt is past its own reads, so that the outage below meets the commit alone.
        await eventually(lambda: _requests(openai_server), lambda count: count == 1)
        # While the provider answers, make the ledger unavailable: every commit attempt now
        # fails like a storage outage.
        await pool.execute("ALTER TABLE crux_generations RENAME TO crux_generations_offline")
        await eventually(stage, lambda value: value == "commit_blocked", timeout=60)
        description = await handle.describe()
        assert description.status is not None and description.status.name == "RUNNING"
        await pool.execute("ALTER TABLE crux_generations_offline RENAME TO crux_generations")
        result = await handle.result()
    assert result.thread_commit is not None
    assert len(openai_server.requests) == 1


async def _requests(server: LoopbackOpenAIServer) -> int:
    return len(server.requests)


async def _row_counts(pool: asyncpg.Pool) -> dict[str, int]:
    tables = [
        "crux_threads",
        "crux_thread_messages",
        "crux_thread_token_counts",
        "crux_generation_staging",
        "crux_generations",
        "crux_request_receipts",
    ]
    return {t: int(await pool.fetchval(f"SELECT count(*) FROM {t}")) for t in tables}


async def test_preview_reports_fit_without_any_side_effect(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"preview:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(*(TextReply(text=reply) for reply in REPLIES[:2]))
    async with new_worker(client, pool, settings) as worker:
        for number in range(2):
            await worker.runtime.generate(
                QUESTIONS[number], thread=thread_id, model=MODEL, generation_id=f"v{number}"
            )
        # Counts cached by the generations would hide a write; clear them first.
        await pool.execute("DELETE FROM crux_thread_token_counts")
        before = await _row_counts(pool)
        revision = (await ThreadStore(pool).read_history_view(thread_id)).revision
        fits = await worker.runtime.preview(QUESTIONS[2], thread=thread_id, model=MODEL)
        over = await worker.runtime.preview(
            QUESTIONS[2], thread=thread_id, model=MODEL, input_budget={"max": 20}
        )
        recent = await worker.runtime.preview(
            QUESTIONS[2],
            thread=thread_id,
            model=MODEL,
            history=crux_history.recent(messages=2),
            input_budget={"max": 60},
        )
    assert fits.status == "fits"
    assert fits.input_tokens is not None and fits.input_tokens > 0
    assert over.status == "over-limit"
    assert recent.status == "fits"
    assert recent.input_tokens is not None and recent.input_tokens < fits.input_tokens
    assert await _row_counts(pool) == before
    assert (await ThreadStore(pool).read_history_view(thread_id)).revision == revision
    assert len(openai_server.requests) == 2


async def test_inspection_is_stored_and_readable_from_another_runtime(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "inspect me", thread=f"inspect:{uuid.uuid4().hex[:6]}", model=MODEL
        )
    receipt = result.steps[0].request
    other = Runtime(client, pool)  # a different process would build exactly this
    assert await other.receipt(receipt.id) == receipt
    inspection = await other.inspect(receipt)
    assert inspection.id == receipt.id
    assert "inspect me" not in inspection.model_dump_json()


async def test_call_site_messages_shadow_the_thread(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"shadow:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="on the thread"), TextReply(text="isolated"))
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate("kept", thread=thread_id, model=MODEL)
        revision = (await ThreadStore(pool).read_history_view(thread_id)).revision
        result = await worker.runtime.generate(
            "replayed question",
            thread=thread_id,
            model=MODEL,
            messages=[{"role": "user", "content": "Use this isolated transcript."}],
        )
    assert result.text == "isolated"
    assert result.thread_commit is None
    assert result.result.history_source == "caller-messages"
    assert _texts(openai_server)[1] == ["Use this isolated transcript.", "replayed question"]
    assert (await ThreadStore(pool).read_history_view(thread_id)).revision == revision


async def test_authoritative_count_rescues_a_request_the_estimate_rejects(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    question = "word " * 60
    openai_server.enqueue(CountReply(input_tokens=40), TextReply(text="fits exactly"))
    async with new_worker(client, pool, settings) as worker:
        estimate = await worker.runtime.preview(question, model=MODEL, input_budget={"max": 64})
        result = await worker.runtime.generate(question, model=MODEL, input_budget={"max": 64})
    assert estimate.status == "over-limit"
    assert result.text == "fits exactly"
    receipt = result.steps[0].request
    assert receipt.measurement == "exact"
    assert receipt.input_tokens == 40
    paths = [r.path for r in openai_server.requests]
    assert paths[0].endswith("/responses/input_tokens")
    assert paths[1].endswith("/chat/completions")


async def test_authoritative_count_confirming_the_overflow_fails_typed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(CountReply(input_tokens=90))
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(RequestCompositionError) as raised:
            await worker.runtime.generate("word " * 60, model=MODEL, input_budget={"max": 64})
    assert raised.value.code == "REQUEST_TOO_LARGE"
    assert raised.value.request_id is not None
    assert len(openai_server.requests) == 1


async def test_ui_facing_fields_show_stage_and_ids_but_no_content(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"ui:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="visible only in PostgreSQL"))
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate(
            "a private question", thread=thread_id, model=MODEL, generation_id="ui-1"
        )
        handle = await closed_run(client, workflow_id_for("ui-1", thread_id))
        assert await handle.query("get_stage", result_type=str) == "completed"

    async def attributes_now() -> dict[str, object]:
        described = await handle.describe()
        return {key.name: value for key, value in described.typed_search_attributes}

    # Search attributes reach visibility asynchronously; poll instead of assuming.
    attributes = await eventually(attributes_now, lambda a: a.get("CruxStage") == "completed")
    description = await handle.describe()
    assert attributes["CruxStage"] == "completed"
    assert attributes["CruxThreadId"] == thread_id
    assert attributes["CruxGenerationId"] == "ui-1"
    assert attributes["CruxModel"] == MODEL
    visible = json.dumps([str(v) for v in attributes.values()]) + str(
        await description.static_summary()
    )
    assert "private" not in visible
    assert "visible only" not in visible


async def test_deleting_a_thread_removes_its_generation_ledger_and_receipts(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gone:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate("hello", thread=thread_id, model=MODEL, generation_id="d1")
    assert await pool.fetchval("SELECT count(*) FROM crux_generations") == 1
    await ThreadStore(pool).delete(thread_id)
    for table in ("crux_generations", "crux_request_receipts", "crux_generation_staging"):
        assert await pool.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_redaction_during_the_provider_call_blocks_the_commit(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"redact-race:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="first"), TextReply(text="slow", delay_seconds=2.0))
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate("secret one", thread=thread_id, model=MODEL)
        pending = asyncio.ensure_future(
            worker.runtime.generate("second", thread=thread_id, model=MODEL, generation_id="r2")
        )

        async def calls() -> int:
            return len(openai_server.requests)

        await eventually(calls, lambda n: n == 2)
        first_user = (await ThreadStore(pool).read_history_view(thread_id)).messages[0].id
        await ThreadStore(pool).redact(thread_id, [first_user])
        with pytest.raises(ThreadError) as raised:
            await pending
    assert raised.value.code == "redacted"
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert all(not m.id.startswith("gen:r2:") for m in view.messages)


async def test_committed_messages_carry_their_token_counts(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"counts:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="counted at commit"))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate("count me", thread=thread_id, model=MODEL)
    assert result.thread_commit is not None
    # Stored by the commit, before any later read had to load the text to count it.
    view = await ThreadStore(pool).read_history_view(thread_id, encoding="o200k_base")
    counter = TokenCounter.for_encoding("o200k_base")
    assert [m.tokens for m in view.messages] == [
        counter.count_text("count me"),
        counter.count_text("counted at commit"),
    ]
