"""A finished generation's result and its reply, read in one statement."""

from __future__ import annotations

import asyncpg

from contracts.generation import GenerationResult
from storage import GenerationStore
from storage.threads import ThreadStore
from tests.storage.conftest import assistant, user
from vocabulary.ids import generation_key


async def _finished(pool: asyncpg.Pool, store: ThreadStore, thread_id: str) -> GenerationStore:
    await store.append(thread_id, [user("gen:r1:user"), assistant("gen:r1:assistant", "done")])
    generations = GenerationStore(pool)
    result = GenerationResult(
        generation_id="r1", thread_id=thread_id, output_message_id="gen:r1:assistant"
    )
    await generations.record_result(result, workflow_id="wf-r1")
    return generations


async def test_the_result_comes_with_its_reply(pool: asyncpg.Pool, store: ThreadStore) -> None:
    generations = await _finished(pool, store, "rr")
    key = generation_key("r1", "rr")
    result, reply = await generations.find_result_and_reply(key, "rr", "gen:r1:assistant")
    assert result is not None and result.output_message_id == "gen:r1:assistant"
    assert reply is not None and reply.id == "gen:r1:assistant" and reply.text == "done"
    assert reply == (await store.load_messages("rr", ["gen:r1:assistant"]))[0]
    missing = await generations.find_result_and_reply(key, "rr", "gen:other:assistant")
    assert missing == (result, None)
    assert await generations.find_result_and_reply("nothing", "rr", "x") == (None, None)


async def test_a_redacted_reply_is_not_read(pool: asyncpg.Pool, store: ThreadStore) -> None:
    generations = await _finished(pool, store, "rx")
    await store.redact("rx", "gen:r1:assistant")
    key = generation_key("r1", "rx")
    result, reply = await generations.find_result_and_reply(key, "rx", "gen:r1:assistant")
    assert result is not None and reply is None


async def test_a_deleted_threads_generation_reads_as_gone(
    pool: asyncpg.Pool, store: ThreadStore
) -> None:
    generations = await _finished(pool, store, "rd")
    await store.delete("rd")
    key = generation_key("r1", "rd")
    _, reply = await generations.find_result_and_reply(key, "rd", "gen:r1:assistant")
    assert reply is None
