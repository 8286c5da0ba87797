"""Summaries of caller transcripts: named by content, kept apart by scope, swept by age."""

from __future__ import annotations

import asyncpg
import pytest

from storage import (
    GenerationStore,
    SummaryArtifact,
    SummaryScope,
    SummaryStore,
    ThreadStore,
    transcript_ids,
    transcript_scope,
)
from vocabulary.errors import ThreadError
from vocabulary.messages import Message


def _transcript(*texts: str) -> list[Message]:
    return [
        Message(role="user" if n % 2 == 0 else "assistant", content=text)
        for n, text in enumerate(texts)
    ]


def test_ids_name_the_content_of_the_prefix_in_its_scope() -> None:
    scope = transcript_scope(None, "main")
    short = transcript_ids(scope, _transcript("a", "b"))
    longer = transcript_ids(scope, _transcript("a", "b", "c"))
    assert longer[:2] == short  # a later call extending the prefix names it the same way
    assert transcript_ids(scope, _transcript("a", "B"))[1] != short[1]
    assert transcript_ids(transcript_scope(None, "other"), _transcript("a", "b")) != short
    assert transcript_ids(transcript_scope("t", "main"), _transcript("a", "b")) != short
    # Caller ids and metadata are not what the model sees: they do not change the name.
    renamed = [m.model_copy(update={"id": f"x{n}"}) for n, m in enumerate(_transcript("a", "b"))]
    assert transcript_ids(scope, renamed) == short


async def test_the_retention_sweep_deletes_old_transcript_summaries_only(
    pool: asyncpg.Pool,
) -> None:
    store = SummaryStore(pool)
    scope = SummaryScope.transcript(None)
    [through] = transcript_ids(transcript_scope(None, "main"), _transcript("a"))
    artifact_id = scope.artifact_id(through, "adaptive", "openai:m")
    artifact = SummaryArtifact(
        artifact_id=artifact_id,
        through_id=through,
        covers=1,
        tokens=3,
        strategy="adaptive",
        model="openai:m",
        text="summary",
        support_request_ids=[],
        support_requests=[],
    )
    await store.put(scope, artifact, [through])
    assert await store.get(scope, artifact_id) is not None
    # Another kind of the same id space is never found through a transcript scope.
    assert await store.get(SummaryScope.thread(""), artifact_id) is None

    generations = GenerationStore(pool)
    await generations.sweep_orphans(3_600)
    assert await store.get(scope, artifact_id) is not None  # younger than the retention
    await pool.execute(
        "UPDATE crux_derived_artifacts SET created_at = now() - interval '2 hours'"
        " WHERE artifact_id = $1",
        artifact_id,
    )
    assert await generations.sweep_orphans(3_600) >= 1
    assert await store.get(scope, artifact_id) is None


async def test_a_summary_finished_after_its_thread_was_deleted_is_not_stored(
    pool: asyncpg.Pool,
) -> None:
    # A preparation for later turns can outlive its generation: its Thread may be deleted
    # before the summary is written, and the summary of deleted messages must not stay.
    thread_id = "deleted-before-its-summary"
    await ThreadStore(pool).append(thread_id, [Message(id="u", role="user", content="hi")])
    await ThreadStore(pool).delete(thread_id)
    store = SummaryStore(pool)
    for scope in (SummaryScope.thread(thread_id), SummaryScope.transcript(thread_id)):
        artifact = SummaryArtifact(
            artifact_id=scope.artifact_id("u", "adaptive", "openai:m"),
            through_id="u",
            covers=1,
            tokens=3,
            strategy="adaptive",
            model="openai:m",
            text="a summary of deleted messages",
        )
        with pytest.raises(ThreadError) as raised:
            await store.put(scope, artifact, ["u"])
        assert raised.value.code == "deleted"
    assert not await pool.fetchval(
        "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1", thread_id
    )
