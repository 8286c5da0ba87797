"""A new generation's claim and its input rows are one statement; a repeated id stages nothing."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from storage import GenerationStore
from vocabulary.errors import ThreadError
from vocabulary.messages import Message
from vocabulary.staging import StagingKind


def _rows() -> list[tuple[str, Message | list[Message]]]:
    return [
        (StagingKind.USER, Message(id="u1", role="user", content="hello")),
        (StagingKind.SYSTEM, Message(role="system", content="be brief")),
        (
            StagingKind.CALLER_MESSAGES,
            [
                Message(id="c1", role="user", content="earlier"),
                Message(id="c2", role="assistant", content="reply"),
            ],
        ),
    ]


async def _kinds(pool: asyncpg.Pool, key: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT kind FROM crux_generation_staging WHERE generation_id = $1 ORDER BY kind", key
    )
    return [str(row["kind"]) for row in rows]


async def test_a_new_id_is_claimed_with_its_rows_and_they_read_back(pool: asyncpg.Pool) -> None:
    generations = GenerationStore(pool)
    key = f"claim:{uuid.uuid4().hex[:8]}"
    claimed, stored = await generations.claim_and_stage(key, "fp-1", _rows(), thread_id="t1")
    assert (claimed, stored) == (True, "fp-1")
    assert await _kinds(pool, key) == sorted(
        ["identity", StagingKind.USER, StagingKind.SYSTEM, StagingKind.CALLER_MESSAGES]
    )
    user = await generations.get_staged(key, 0, StagingKind.USER)
    assert user is not None and user.message.text == "hello"
    listed = await generations.get_staged_messages(key, StagingKind.CALLER_MESSAGES)
    assert [m.text for m in listed or []] == ["earlier", "reply"]
    thread_ids = await pool.fetch(
        "SELECT DISTINCT thread_id FROM crux_generation_staging WHERE generation_id = $1", key
    )
    assert [row["thread_id"] for row in thread_ids] == ["t1"]


async def test_a_claimed_id_stages_nothing_and_reports_the_fingerprint_on_record(
    pool: asyncpg.Pool,
) -> None:
    generations = GenerationStore(pool)
    key = f"claim:{uuid.uuid4().hex[:8]}"
    await generations.claim_and_stage(key, "fp-1", _rows()[:1], thread_id=None)
    other = [(StagingKind.USER, Message(id="u1", role="user", content="something else"))]
    claimed, stored = await generations.claim_and_stage(key, "fp-2", other, thread_id=None)
    assert (claimed, stored) == (False, "fp-1")
    user = await generations.get_staged(key, 0, StagingKind.USER)
    assert user is not None and user.message.text == "hello"
    assert await _kinds(pool, key) == sorted(["identity", StagingKind.USER])


async def test_text_postgresql_cannot_store_is_refused_before_the_id_is_claimed(
    pool: asyncpg.Pool,
) -> None:
    generations = GenerationStore(pool)
    key = f"claim:{uuid.uuid4().hex[:8]}"
    bad = [(StagingKind.USER, Message(id="u1", role="user", content="nul \x00 byte"))]
    with pytest.raises(ThreadError) as raised:
        await generations.claim_and_stage(key, "fp-1", bad, thread_id=None)
    assert raised.value.code == "invalid_message"
    assert await _kinds(pool, key) == []
    # The id stays free for a valid request.
    claimed, _ = await generations.claim_and_stage(key, "fp-1", _rows()[:1], thread_id=None)
    assert claimed
