"""Receipts are recorded once per request id and loaded by id in one round trip."""

from __future__ import annotations

import asyncpg

from storage import ReceiptStore, ThreadStore
from vocabulary.messages import Message


async def test_a_repeated_record_keeps_the_first_row(pool: asyncpg.Pool) -> None:
    store = ReceiptStore(pool)
    for tokens in (10, 11):
        await store.record(
            "request_a",
            generation_key="t/g",
            thread_id="t",
            receipt={"id": "request_a", "input_tokens": tokens},
            inspection={"id": "request_a"},
        )
    loaded = await store.load(["request_a", "request_missing", "request_a"])
    assert list(loaded) == ["request_a"]
    assert loaded["request_a"].receipt["input_tokens"] == 10
    assert loaded["request_a"].inspection == {"id": "request_a"}
    assert await store.load([]) == {}


async def test_deleting_the_thread_removes_its_receipts(pool: asyncpg.Pool) -> None:
    threads, store = ThreadStore(pool), ReceiptStore(pool)
    await threads.append("erased", [Message(id="m1", role="user", content="hi")])
    await store.record(
        "request_b", generation_key="erased/g", thread_id="erased", receipt={}, inspection=None
    )
    await threads.delete("erased")
    assert await store.load(["request_b"]) == {}
