"""Streaming: deltas are progress; only the committed turn is the result."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
from temporalio.client import Client

import crux
from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer, RecordedRequest, StreamErrorReply, TextReply
from storage import ThreadStore
from tests.helpers import closed_run, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"
REPLY = "Lisbon has seven hills, yellow trams and very good custard tarts near the river."


async def test_stream_yields_progress_then_the_committed_turn(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"stream:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text=REPLY, sse_chunk_size=7))
    async with new_worker(client, pool, settings) as worker:
        updates = [
            update
            async for update in worker.runtime.stream(
                "Tell me about Lisbon", thread=thread_id, model=MODEL, generation_id="s1"
            )
        ]
    assert isinstance(updates[-1], crux.StreamCommitted)
    generation = updates[-1].generation
    assert generation.text == REPLY
    assert generation.thread_commit is not None
    assert generation.thread_commit.status == "selected"
    streamed = "".join(u.text for u in updates if isinstance(u, crux.StreamDelta))
    assert REPLY.startswith(streamed)
    assert openai_server.requests[0].body["stream"] is True
    # Deltas are staging rows: nothing is left once the turn is committed but the
    # content-free identity fingerprint of the generation id.
    assert await pool.fetchval("SELECT count(*) FROM crux_generation_staging") == 1
    assert await pool.fetchval("SELECT kind FROM crux_generation_staging") == "identity"
    history = await (await closed_run(client, workflow_id_for("s1", thread_id))).fetch_history()
    assert "custard" not in history.to_json()
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 2


async def test_a_stream_broken_midway_is_retried_and_announced_as_a_reset(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(
        # Text arrives, then an in-stream server error: the attempt is retried by Temporal.
        StreamErrorReply(text="Partial words that", delay_seconds=0.2),
        TextReply(text=REPLY, sse_chunk_size=5),
    )
    async with new_worker(client, pool, settings) as worker:
        updates = [
            update
            async for update in worker.runtime.stream(
                "Again", thread=f"stream-retry:{uuid.uuid4().hex[:6]}", model=MODEL
            )
        ]
    final = updates[-1]
    assert isinstance(final, crux.StreamCommitted)
    assert final.generation.text == REPLY
    assert len(openai_server.requests) == 2
    kinds = [type(u).__name__ for u in updates]
    assert kinds[0] == "StreamDelta"
    assert "StreamReset" in kinds
    after_reset = updates[kinds.index("StreamReset") + 1 : -1]
    assert REPLY.startswith("".join(u.text for u in after_reset if isinstance(u, crux.StreamDelta)))


async def test_streams_in_flight_together_on_one_thread_each_get_their_own_text(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Six streams of one process on one Thread: every delta reaches its own caller only."""

    def respond(request: RecordedRequest) -> TextReply:
        messages = request.body.get("messages") or []
        question = str(messages[-1].get("content"))
        return TextReply(text=_answer(question), sse_chunk_size=4, delay_seconds=0.05)

    thread_id = f"stream-busy:{uuid.uuid4().hex[:6]}"
    questions = [f"Question {n} about the river" for n in range(6)]

    async def stream(question: str) -> list[object]:
        return [
            update
            async for update in worker.runtime.stream(question, thread=thread_id, model=MODEL)
        ]

    async with LoopbackOpenAIServer(responder=respond) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            runs = await asyncio.gather(*(stream(question) for question in questions))
    for question, updates in zip(questions, runs, strict=True):
        final = updates[-1]
        assert isinstance(final, crux.StreamCommitted)
        assert final.generation.text == _answer(question)
        deltas = [u for u in updates if isinstance(u, crux.StreamDelta)]
        assert len(deltas) > 1
        assert "".join(delta.text for delta in deltas) == _answer(question)
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 2  # one turn selected, the others kept as alternatives


def _answer(question: str) -> str:
    return f"{question}: the trams climb the hills slowly and the tarts are warm."
