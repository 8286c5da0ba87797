"""The response cache on the real stack: Temporal dev server, PostgreSQL, loopback HTTP.

A hit makes no provider call and still commits a fresh user and assistant pair with the
generation's own message ids; its receipt says `cache: hit` with the match and similarity.
Entries are written after the commit only, scoped, and go with the Thread they came from.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

import crux
from activities import GenerationActivities, ProviderRegistry
from contracts.activities import InvokeModelInput
from contracts.cache import CacheScope
from contracts.cache_activities import LookupCacheInput, WriteCacheInput
from crux import MessageEntry
from crux.config import Settings
from crux.prompts import PromptRegistry
from planner import ModelCatalog, RequestReceipt
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import CacheStore, GenerationStore, ThreadStore
from tests.helpers import RunningWorker, new_worker, settings_for
from vocabulary.ids import generation_key, workflow_id_for
from vocabulary.messages import Message

MODEL = "openai:gpt-4o-mini"


def _completions(server: LoopbackOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.split("?")[0].endswith("/chat/completions"))


def _embeddings(server: LoopbackOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.split("?")[0].endswith("/embeddings"))


async def _receipt(worker: RunningWorker, generation: crux.Generation) -> RequestReceipt:
    return await worker.runtime.receipt(generation.steps[-1].request.id)


async def _entries(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT entry_id, partition, thread_id, hit_count, dimensions FROM crux_cache_entries"
    )


async def _pair(pool: asyncpg.Pool, thread_id: str) -> list[tuple[str, str, str]]:
    snapshot = await ThreadStore(pool).read(thread_id)
    return [
        (entry.role, entry.id, entry.content if isinstance(entry.content, str) else "")
        for entry in snapshot.entries
        if isinstance(entry, MessageEntry)
    ]


async def test_an_exact_hit_makes_no_provider_call_and_commits_a_fresh_pair(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    namespace = f"faq-{uuid.uuid4().hex[:6]}"
    cache = crux.cache(namespace=namespace)
    first_thread, second_thread = (f"cache:{uuid.uuid4().hex[:8]}" for _ in range(2))
    openai_server.enqueue(TextReply(text="Paris."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        first = await worker.runtime.generate(
            "Capital of France?", thread=first_thread, model=MODEL, cache=cache
        )
        second = await worker.runtime.generate(
            "Capital of France?", thread=second_thread, model=MODEL, cache=cache
        )
        missed, hit = await _receipt(worker, first), await _receipt(worker, second)

    assert _completions(openai_server) == 1
    assert second.text == first.text == "Paris."
    assert missed.cache is not None and missed.cache.status == "miss"
    assert hit.cache is not None
    assert (hit.cache.status, hit.cache.match, hit.cache.similarity) == ("hit", "exact", 1.0)
    assert second.usage.input_tokens == 0
    # A fresh pair on the second Thread, with its own ids.
    first_pair, second_pair = await _pair(pool, first_thread), await _pair(pool, second_thread)
    assert [(role, text) for role, _, text in second_pair] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    assert not {i for _, i, _ in first_pair} & {i for _, i, _ in second_pair}
    assert second.message.id == second_pair[1][1]
    entries = await _entries(pool)
    assert len(entries) == 1
    assert entries[0]["partition"] == f"namespace:{namespace}"
    assert entries[0]["hit_count"] == 1


async def test_a_different_setting_or_system_text_misses(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(namespace=f"faq-{uuid.uuid4().hex[:6]}")
    openai_server.enqueue(TextReply(text="A."), TextReply(text="B."), TextReply(text="C."))
    plain = crux.prompt(id="plain", system="Answer briefly.")
    other = crux.prompt(id="other", system="Answer at length.")
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, prompts=[plain, other]) as worker:
        runtime = worker.runtime
        await runtime.generate(plain, input="Hi?", model=MODEL, cache=cache)
        hot = await runtime.generate(
            plain, input="Hi?", model=MODEL, cache=cache, settings={"temperature": 0.9}
        )
        # Another prompt is another scope, whatever else is equal.
        other_prompt = await runtime.generate(other, input="Hi?", model=MODEL, cache=cache)
        again = await runtime.generate(plain, input="Hi?", model=MODEL, cache=cache)

    assert _completions(openai_server) == 3
    assert (hot.text, other_prompt.text, again.text) == ("B.", "C.", "A.")


async def test_a_similar_turn_hits_semantically_and_an_unrelated_one_misses(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(semantic=True, similarity_threshold=0.9, namespace="geo")
    openai_server.enqueue(TextReply(text="Paris."), TextReply(text="Knead it."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        await runtime.generate("What is the capital of France?", model=MODEL, cache=cache)
        similar = await runtime.generate(
            "What is the capital city of France?", model=MODEL, cache=cache
        )
        unrelated = await runtime.generate("How do I bake bread at home?", model=MODEL, cache=cache)
        similar_receipt = await _receipt(worker, similar)
        unrelated_receipt = await _receipt(worker, unrelated)

    assert _completions(openai_server) == 2
    assert similar.text == "Paris."
    assert unrelated.text == "Knead it."
    record = similar_receipt.cache
    assert record is not None and (record.status, record.match) == ("hit", "semantic")
    assert record.similarity is not None and 0.9 <= record.similarity < 1.0
    missed = unrelated_receipt.cache
    assert missed is not None and missed.status == "miss"
    assert missed.similarity is not None and missed.similarity < 0.9

    # The embedded server ships pgvector: the migration indexed the offline size. The
    # bounded scan (a server without pgvector) finds the same entry as the index.
    assert 256 in await CacheStore(pool).indexed_sizes()
    row = await pool.fetchrow(
        "SELECT partition, prompt_id, model, owner, context_key, embedding"
        " FROM crux_cache_entries WHERE reply->>'content' = 'Paris.'"
    )
    assert row is not None
    scope = CacheScope(
        partition=row["partition"],
        prompt_id=row["prompt_id"],
        model=row["model"],
        owner=row["owner"],
    )
    vector = list(row["embedding"])
    indexed = await CacheStore(pool).find_similar(
        scope, row["context_key"], "offline:ngram-256", vector
    )
    scanned = await CacheStore(pool, vector=False).find_similar(
        scope, row["context_key"], "offline:ngram-256", vector
    )
    assert indexed is not None and scanned is not None
    assert indexed.entry_id == scanned.entry_id
    assert scanned.similarity == pytest.approx(1.0, abs=1e-4)


async def test_openai_embeddings_are_requested_from_the_configured_endpoint(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(
        semantic=True, similarity_threshold=0.9, embedding_model="openai:text-embedding-3-small"
    )
    openai_server.enqueue(TextReply(text="Paris."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate("What is the capital of France?", model=MODEL, cache=cache)
        hit = await worker.runtime.generate(
            "What is the capital city of France?", model=MODEL, cache=cache
        )
        receipt = await _receipt(worker, hit)

    assert _completions(openai_server) == 1
    assert _embeddings(openai_server) == 2
    assert receipt.cache is not None and receipt.cache.match == "semantic"
    entries = await _entries(pool)
    assert [e["dimensions"] for e in entries] == [LoopbackOpenAIServer.embedding_dimensions]


async def test_redacting_or_deleting_the_source_thread_removes_its_entries(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(namespace=f"faq-{uuid.uuid4().hex[:6]}")
    source, reader, other = (f"cache:{uuid.uuid4().hex[:8]}" for _ in range(3))
    openai_server.enqueue(TextReply(text="One."), TextReply(text="Two."), TextReply(text="Three."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        first = await runtime.generate("Question one?", thread=source, model=MODEL, cache=cache)
        await runtime.generate("Question two?", thread=other, model=MODEL, cache=cache)
        assert len(await _entries(pool)) == 2
        commit = first.thread_commit
        assert commit is not None
        # Redacting the user turn the entry was built from removes it (and only it).
        await crux.thread(id=source, storage=pool).redact([commit.message_ids[0]])
        remaining = await _entries(pool)
        assert [e["thread_id"] for e in remaining] == [other]
        again = await runtime.generate("Question one?", thread=reader, model=MODEL, cache=cache)
        assert again.text == "Three."  # a miss: the provider answered again
        # Deleting a Thread removes every entry derived from it.
        await crux.thread(id=other, storage=pool).delete()
        assert [e["thread_id"] for e in await _entries(pool)] == [reader]

    assert _completions(openai_server) == 3


async def test_two_equal_requests_in_flight_both_commit_and_one_entry_is_kept(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(namespace=f"faq-{uuid.uuid4().hex[:6]}")
    threads = [f"cache:{uuid.uuid4().hex[:8]}" for _ in range(2)]
    openai_server.enqueue(TextReply(text="First."), TextReply(text="Second."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        results = await asyncio.gather(
            *(worker.runtime.generate("Same?", thread=t, model=MODEL, cache=cache) for t in threads)
        )
        later = await worker.runtime.generate(
            "Same?", thread=f"cache:{uuid.uuid4().hex[:8]}", model=MODEL, cache=cache
        )

    # Neither was committed when the other looked: both missed, both called the provider
    # and both committed their own pair; the first write won.
    assert _completions(openai_server) == 2
    assert sorted(r.text for r in results) == ["First.", "Second."]
    for thread_id, result in zip(threads, results, strict=True):
        assert [role for role, _, _ in await _pair(pool, thread_id)] == ["user", "assistant"]
        assert result.thread_commit is not None
    entries = await _entries(pool)
    assert len(entries) == 1
    assert later.text in {"First.", "Second."}
    assert entries[0]["hit_count"] == 1


async def test_an_uncommitted_turn_writes_no_entry(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    openai_server.enqueue(TextReply(text="not json"), TextReply(text="still not json"))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.OutputValidationError):
            await worker.runtime.generate(
                "Judge.",
                thread=f"cache:{uuid.uuid4().hex[:8]}",
                model=MODEL,
                output=crux.output(schema, max_retries=1),
                cache=crux.cache(),
            )
    assert await _entries(pool) == []
    pending = await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE kind = 'cache-pending'"
    )
    assert pending == 0


async def test_a_repeated_question_in_one_thread_misses_because_the_history_differs(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"cache:{uuid.uuid4().hex[:8]}"
    openai_server.enqueue(TextReply(text="One."), TextReply(text="Two."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate("Again?", thread=thread_id, model=MODEL, cache=True)
        second = await worker.runtime.generate("Again?", thread=thread_id, model=MODEL, cache=True)
    assert second.text == "Two."
    assert _completions(openai_server) == 2


async def test_cache_stats_and_clear_are_content_free(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from crux._cache_commands import cache_clear, cache_stats

    openai_server.enqueue(TextReply(text="zq-cached-reply-71"))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate(
            "zq-cached-question-71", model=MODEL, cache=crux.cache(namespace="cli")
        )
    store = CacheStore(pool)
    filters = {"namespace": None, "adhoc": False, "thread": None, "prompt": None, "model": None}
    await cache_stats(store, argparse.Namespace(**filters, json=False))
    printed = capsys.readouterr().out
    assert "namespace:cli" in printed and "1 entries" in printed
    assert "zq-cached" not in printed
    with pytest.raises(crux.ConfigurationError):
        await cache_clear(store, argparse.Namespace(**filters, expired=False, all=False))
    await cache_clear(
        store, argparse.Namespace(**{**filters, "namespace": "cli"}, expired=False, all=False)
    )
    assert "deleted 1 cache entry" in capsys.readouterr().out
    assert await _entries(pool) == []


async def _activities(pool: asyncpg.Pool, database_url: str) -> GenerationActivities:
    settings = Settings.model_validate({"database_url": database_url})
    return GenerationActivities(
        threads=ThreadStore(pool),
        generations=GenerationStore(pool),
        providers=ProviderRegistry(settings, httpx.AsyncClient()),
        prompts=PromptRegistry(()),
        catalog=ModelCatalog.default(),
    )


async def test_a_lookup_on_a_moved_revision_stages_nothing_and_says_so(
    pool: asyncpg.Pool, database_url: str
) -> None:
    threads, generations = ThreadStore(pool), GenerationStore(pool)
    activities = await _activities(pool, database_url)
    thread_id = f"cache:{uuid.uuid4().hex[:6]}"
    await threads.append(thread_id, [Message(id="q0", role="user", content="first")])
    revision = await threads.revision(thread_id)
    await threads.append(thread_id, [Message(id="a0", role="assistant", content="moved")])
    key = generation_key("g1", thread_id)
    await generations.stage(
        key, 0, "user", Message(id="gen:g1:user", role="user", content="q"), thread_id=thread_id
    )
    invoke = InvokeModelInput(
        generation_id="g1",
        attempt=1,
        thread_id=thread_id,
        revision=revision,
        history_source="thread",
        model="offline:echo",
        message_ranges=[(0, 1)],
    )
    found = await ActivityEnvironment().run(
        activities.lookup_cache,
        LookupCacheInput(invoke=invoke, request_id="r1", prompt_id="p", cache=crux.cache()),
    )
    assert found.revision_moved and not found.hit
    rows = await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE generation_id = $1 AND attempt = 1",
        key,
    )
    assert rows == 0
    # A write for a generation whose commit is not recorded stores nothing.
    written = await ActivityEnvironment().run(
        activities.write_cache,
        WriteCacheInput(
            generation_id="g1", thread_id=thread_id, accepted_attempt=1, cache=crux.cache()
        ),
    )
    assert written.outcome == "uncommitted"
    assert await _entries(pool) == []


async def test_a_hit_streams_the_whole_reply_and_its_history_holds_no_text(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    question, answer = "zq-cache-question-3f1", "zq-cache-answer-3f1 in several words"
    cache = crux.cache(namespace=f"faq-{uuid.uuid4().hex[:6]}", semantic=True)
    thread_id = f"cache:{uuid.uuid4().hex[:8]}"
    openai_server.enqueue(TextReply(text=answer))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate(question, model=MODEL, cache=cache)
        streamed = ""
        committed: crux.Generation | None = None
        async for update in worker.runtime.stream(
            question, thread=thread_id, model=MODEL, cache=cache, generation_id="hit-1"
        ):
            if isinstance(update, crux.StreamDelta):
                streamed += update.text
            elif isinstance(update, crux.StreamCommitted):
                committed = update.generation
            else:
                streamed = ""
        assert committed is not None
        receipt = await _receipt(worker, committed)
        history = await client.get_workflow_handle(
            workflow_id_for("hit-1", thread_id)
        ).fetch_history()

    assert _completions(openai_server) == 1
    assert streamed == committed.text == answer
    assert receipt.cache is not None and receipt.cache.status == "hit"
    # Neither the question, the reply nor an embedding enters the workflow's history.
    dumped = history.to_json()
    assert "zq-cache" not in dumped
    assert "embedding" not in dumped
    assert "zq-cache" not in receipt.model_dump_json()


async def test_a_hit_passes_the_acceptance_gate_and_a_rejected_one_is_retried_at_the_provider(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    cache = crux.cache(namespace=f"gate-{uuid.uuid4().hex[:6]}")
    accepted, rejected = (f"cache-gate:{uuid.uuid4().hex[:8]}" for _ in range(2))
    openai_server.enqueue(TextReply(text="Paris."), TextReply(text="Capital: Paris."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        await runtime.generate("Capital of France?", model=MODEL, cache=cache)
        # The cached reply meets these constraints: the hit is committed, checked.
        passed = await runtime.generate(
            "Capital of France?",
            thread=accepted,
            model=MODEL,
            cache=cache,
            constraints=[crux.constraints.require("Paris")],
        )
        passed_receipt = await _receipt(worker, passed)
        # It does not meet these: the corrective attempt asks the provider.
        retried = await runtime.generate(
            "Capital of France?",
            thread=rejected,
            model=MODEL,
            cache=cache,
            constraints=[crux.constraints.require("Capital:")],
        )
        receipts = [await runtime.receipt(step.request.id) for step in retried.steps]

    assert _completions(openai_server) == 2
    assert passed.text == "Paris."
    assert passed_receipt.cache is not None and passed_receipt.cache.status == "hit"
    assert passed_receipt.constraints is not None and passed_receipt.constraints.satisfied
    assert retried.text == "Capital: Paris."
    first, last = receipts[0], receipts[-1]
    assert first.cache is not None and first.cache.status == "hit"
    assert first.constraints is not None and not first.constraints.satisfied
    assert last.previous_reason == "constraint-retry"
    assert [text for _, _, text in await _pair(pool, rejected)] == [
        "Capital of France?",
        "Capital: Paris.",
    ]
