"""Managed history over caller transcripts, and how summaries are chunked, end to end.

A managed `history()` over call-site or prompt-level messages prepares its summary like one
over a Thread: the prefix is named by its content, so a later call sending the same prefix
reuses the summary, and another owner never finds it. `summarize.*(chunk_tokens=,
chunk_units=)` size the chunks; `adaptive` goes hierarchical for a prefix of several chunks.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from temporalio.client import Client

import crux
from contracts.generation import GenerationOutcome
from crux.models import workflow_id_for
from crux.prompts import Summarizer
from crux.runtime import Generation
from providers.loopback import LoopbackOpenAIServer, Reply, TextReply
from providers.loopback._server import RecordedRequest
from providers.loopback._shared import echo_text
from tests.helpers import eventually, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"
SUMMARY_MARK = "faithful, compact summaries"
MERGE_MARK = "Merge these consecutive summaries"
SUMMARY_TEXT = "Earlier: carriers renegotiated, depots restocked."
BUDGET = {"max": 400}
MANAGED = crux.history(recent={"messages": 2}, summary={"model": MODEL})


class Responder:
    """Summaries for support calls, echoes for the main requests."""

    def __init__(self, *, one_generation: bool = False) -> None:
        self._one_generation = one_generation
        self.summary_bodies: list[dict[str, Any]] = []
        # For a single generation: summary calls after its main request are the maintenance
        # that prepares the next prefix in the background, which may or may not reach the
        # server before it closes.
        self.maintenance_bodies: list[dict[str, Any]] = []
        self.main_bodies: list[dict[str, Any]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        body: dict[str, Any] = request.body or {}
        messages: list[dict[str, Any]] = body.get("messages") or []
        if messages and SUMMARY_MARK in str(messages[0].get("content")):
            later = self._one_generation and self.main_bodies
            (self.maintenance_bodies if later else self.summary_bodies).append(body)
            return TextReply(text=SUMMARY_TEXT)
        self.main_bodies.append(body)
        return TextReply(text=echo_text(messages))

    def merges(self) -> int:
        return sum(
            MERGE_MARK in str(body["messages"][-1]["content"]) for body in self.summary_bodies
        )


def _transcript(turns: int, words: int = 40) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for turn in range(turns):
        filler = " ".join(f"crate{turn}-{i}" for i in range(words))
        messages.append({"role": "user", "content": f"Question {turn}: {filler}"})
        messages.append({"role": "assistant", "content": f"Answer {turn}: {filler}"})
    return messages


def _managed(prompt_id: str | None = None, **summary: Any) -> crux.Prompt:
    return crux.prompt(
        id=prompt_id or f"transcript-{uuid.uuid4().hex[:6]}",
        use=[crux.history(recent={"messages": 2}, summary={"model": MODEL, **summary})],
    )


def _codes(result: Generation) -> set[str]:
    return {warning.code for warning in result.steps[0].request.warnings}


def _sends_summary(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith("Summary of the earlier conversation")


async def _staged_copies(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE kind = 'summary-source'"
    )
    return count


async def test_call_site_messages_get_a_summary_reused_by_the_same_prefix_not_across_owners(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = Responder()
    transcript = _transcript(turns=12)
    prompt = _managed()
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:

            async def turn(question: str, *, owner: str = "main") -> Generation:
                return await worker.runtime.generate(
                    prompt,
                    input=question,
                    messages=transcript,
                    model=MODEL,
                    input_budget=BUDGET,
                    owner=owner,
                )

            first = await turn("What did we decide?")
            # Let the maintenance started after the response land (it drops its copy).
            await eventually(lambda: _staged_copies(pool), lambda n: n == 0)
            prepared = len(responder.summary_bodies)
            second = await turn("And the depots?")
            after_second = len(responder.summary_bodies)
            other_owner = await turn("And the carriers?", owner="someone-else")
            inspection = await worker.runtime.inspect(first.steps[0].request)
            await eventually(lambda: _staged_copies(pool), lambda n: n == 0)

    # The transcript did not fit: the summary was prepared inline, then sent.
    assert "HISTORY_SUMMARY_INLINE" in _codes(first)
    assert first.result.history_source == "caller-messages" and first.thread_commit is None
    assert prepared >= 1 and _sends_summary(responder.main_bodies[0])
    assert set(inspection.linked_request_ids) >= {r.id for r in inspection.support_requests}
    assert inspection.support_requests
    # The same prefix again: the stored summary is found by content, no support call.
    assert "HISTORY_SUMMARY_INLINE" not in _codes(second)
    assert after_second == prepared and _sends_summary(responder.main_bodies[1])
    # Another owner never finds it: it pays for its own.
    assert "HISTORY_SUMMARY_INLINE" in _codes(other_owner)
    assert len(responder.summary_bodies) > after_second
    # Transcript summaries are stored apart from Thread summaries, with content-derived ids.
    rows = await pool.fetch(
        "SELECT thread_id, source_message_ids FROM crux_derived_artifacts"
        " WHERE kind = 'transcript-summary'"
    )
    assert rows and all(row["thread_id"] == "" for row in rows)
    assert all(i.startswith("tx-") for row in rows for i in row["source_message_ids"])


async def test_prompt_level_messages_are_summarised_for_a_plain_temporal_client(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    responder = Responder()
    registered = crux.prompt(
        id=f"seeded-{uuid.uuid4().hex[:6]}",
        messages=_transcript(turns=12),
        use=[MANAGED],
    )
    thread_id = f"shadowed-{uuid.uuid4().hex[:6]}"
    async with LoopbackOpenAIServer(responder=responder) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings, prompts=[registered]) as worker:
            raw = await client.execute_workflow(
                "ManagedGenerationWorkflow",
                {
                    "generation_id": "plain-1",
                    "thread_id": thread_id,
                    "prompt_id": registered.id,
                    "model": MODEL,
                    "input": "from a plain client",
                    "input_budget": BUDGET,
                    # A plain client names its history policy itself.
                    "history": MANAGED.model_dump(mode="json"),
                },
                id=workflow_id_for("plain-1", thread_id),
                task_queue=worker.task_queue,
            )
    result = GenerationOutcome.model_validate(raw)
    assert result.history_source == "caller-messages" and result.thread_commit is None
    assert responder.summary_bodies and _sends_summary(responder.main_bodies[-1])
    # Scoped by the Thread the generation names: deleting it deletes the summary too.
    scoped = await pool.fetchval(
        "SELECT count(*) FROM crux_derived_artifacts"
        " WHERE kind = 'transcript-summary' AND thread_id = $1",
        thread_id,
    )
    assert scoped >= 1
    await crux.thread(id=thread_id, storage=pool).delete()
    assert not await pool.fetchval(
        "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1", thread_id
    )


async def test_chunk_limits_and_adaptive_going_hierarchical(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Chunks default to one support call of the summary model; smaller ones on request."""
    transcript = _transcript(turns=12)

    async def summary_calls(strategy: Summarizer) -> Responder:
        responder = Responder(one_generation=True)
        async with LoopbackOpenAIServer(responder=responder) as server:
            settings = settings_for(database_url, openai_base_url=server.base_url)
            async with new_worker(client, pool, settings) as worker:
                result = await worker.runtime.generate(
                    _managed(strategy=strategy),
                    input="What did we decide?",
                    messages=transcript,
                    model=MODEL,
                    input_budget=BUDGET,
                    owner=f"owner-{uuid.uuid4().hex[:6]}",  # nothing stored is shared
                )
        assert "HISTORY_SUMMARY_INLINE" in _codes(result)
        return responder

    # By default the whole prefix is one chunk of the summary model: one call, no merge.
    whole = await summary_calls(crux.summarize.adaptive())
    assert len(whole.summary_bodies) == 1 and whole.merges() == 0
    # Two groups per chunk: adaptive without an earlier summary goes hierarchical.
    adaptive = await summary_calls(crux.summarize.adaptive(chunk_units=2))
    assert adaptive.merges() >= 1
    assert len(adaptive.summary_bodies) - adaptive.merges() >= 5
    # The original fixed chunks are one call's worth here too, but 8 units at most.
    fixed = await summary_calls(crux.summarize.hierarchical(chunk_tokens=4_000, chunk_units=8))
    assert fixed.merges() == 1 and len(fixed.summary_bodies) >= 3
    # A token limit alone cuts too.
    by_tokens = await summary_calls(crux.summarize.regenerate(chunk_tokens=300))
    assert by_tokens.merges() >= 1
