"""The public Thread handle in `crux.thread`."""

from __future__ import annotations

import asyncpg
import pytest

from crux.errors import ThreadError
from crux.messages import Message
from crux.thread import Thread, thread
from storage.threads import MessageEntry, ThreadStore
from tests.storage.conftest import ids, user


async def test_handle_accepts_mappings_and_messages(store: ThreadStore) -> None:
    conversation = thread(id="support:ticket-42", storage=store)
    first = await conversation.append({"id": "message:1", "role": "user", "content": "Hi"})
    again = await conversation.append(Message(id="message:1", role="user", content="Hi"))
    assert first.replayed is False
    assert again.replayed is True
    await conversation.append([{"id": "a1", "role": "assistant", "content": "Hello"}])
    assert ids(await conversation.read()) == ["message:1", "a1"]


async def test_handle_rejects_malformed_mappings(store: ThreadStore) -> None:
    conversation = thread(id="t", storage=store)
    with pytest.raises(ThreadError) as caught:
        await conversation.append({"id": "x", "role": "narrator", "content": "secret text"})
    assert caught.value.code == "invalid_message"
    assert "secret text" not in str(caught.value)


async def test_handle_over_a_pool_edits_selects_redacts_and_deletes(pool: asyncpg.Pool) -> None:
    conversation = thread(id="t", storage=pool)
    await conversation.append(user("q1"))
    await conversation.append(Message(id="r1", role="assistant", content="answer"))
    edited = await conversation.edit("q1", content="again", id="q2")
    assert edited.selected_head == "q2"
    assert (await conversation.select("q1")).head == "r1"
    await conversation.redact(["r1"])
    assert [entry.kind for entry in (await conversation.read()).entries] == ["message", "redacted"]
    view = await conversation.history()
    assert view.revision == await conversation.revision()
    assert view.message_ids == ("q1",)
    await conversation.delete()
    with pytest.raises(ThreadError) as caught:
        await conversation.read()
    assert caught.value.code == "deleted"


async def test_owner_bound_handles(store: ThreadStore) -> None:
    conversation = thread(id="t", storage=store)
    await conversation.append(user("q1"))
    await store.register_owner("t", "session-1")
    session = conversation.for_owner("session-1")
    assert isinstance(session, Thread)
    assert session.owner == "session-1"
    await session.append(user("s1"), after="q1")
    [first, second] = (await session.read()).entries
    assert isinstance(first, MessageEntry)
    assert second.id == "s1"
    assert repr(session) == "Thread(id='t', owner='session-1')"


async def test_thread_errors_never_carry_message_text(store: ThreadStore) -> None:
    conversation = thread(id="t", storage=store)
    await conversation.append(user("u1", "very private words"))
    failures: list[ThreadError] = []
    for call in (
        conversation.append(user("u1", "other private words")),
        conversation.append(user("u2", "private"), after="ghost"),
        conversation.edit("ghost", content="private edit"),
        conversation.read(at="ghost"),
    ):
        with pytest.raises(ThreadError) as caught:
            await call
        failures.append(caught.value)
    for failure in failures:
        assert "private" not in str(failure)
        assert failure.thread_id == "t"
