"""Text PostgreSQL cannot store is refused once, typed, never as "repeat the call"."""

from __future__ import annotations

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crux.errors import ThreadCommitError, ThreadError
from crux.messages import Message, ToolCallPart
from storage import GenerationStore
from storage.threads import ThreadStore

BAD = st.sampled_from(["\x00", "\ud800", "\udfff"])
TEXT = st.text(max_size=6)


def _spliced(prefix: str, bad: str, suffix: str) -> str:
    return prefix + bad + suffix


UNSTORABLE_MESSAGES = st.one_of(
    st.builds(
        lambda text: Message(role="user", content=text),
        st.builds(_spliced, TEXT, BAD, TEXT),
    ),
    st.builds(
        lambda text: Message(id=text, role="user", content="fine"),
        st.builds(_spliced, st.just("m"), BAD, TEXT),
    ),
    st.builds(
        lambda text: Message(
            role="assistant",
            content=[ToolCallPart(tool_call_id="c1", tool_name="lookup", input={"q": text})],
        ),
        st.builds(_spliced, TEXT, BAD, TEXT),
    ),
)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=UNSTORABLE_MESSAGES)
async def test_append_refuses_unstorable_text_as_invalid_message(
    store: ThreadStore, message: Message
) -> None:
    with pytest.raises(ThreadError) as raised:
        await store.append("t", [message])
    assert not isinstance(raised.value, ThreadCommitError)
    assert raised.value.code == "invalid_message"
    for bad in ("\x00", "\ud800", "\udfff"):
        assert bad not in str(raised.value)
    assert (await store.read_history_view("t")).messages == ()


@pytest.mark.parametrize("thread_id", ["t\x00", "t\ud800"])
async def test_unstorable_thread_ids_are_invalid(store: ThreadStore, thread_id: str) -> None:
    with pytest.raises(ThreadError) as raised:
        await store.append(thread_id, [Message(role="user", content="hi")])
    assert raised.value.code == "invalid_message"


@pytest.mark.parametrize("limit", [10**20, 2**31])
async def test_page_limits_postgresql_cannot_take_are_invalid(
    store: ThreadStore, limit: int
) -> None:
    await store.append("t", [Message(role="user", content="hi")])
    with pytest.raises(ThreadError) as raised:
        await store.read("t", limit=limit)
    assert raised.value.code == "invalid_message"


async def test_staging_refuses_unstorable_text_before_writing(pool: asyncpg.Pool) -> None:
    generations = GenerationStore(pool)
    with pytest.raises(ThreadError) as raised:
        await generations.stage("g", 1, "output", Message(role="assistant", content="a\x00b"))
    assert raised.value.code == "invalid_message"
    with pytest.raises(ThreadError):
        await generations.stage_messages(
            "g", "caller-messages", [Message(role="user", content="\ud800")]
        )
    assert await pool.fetchval("SELECT count(*) FROM crux_generation_staging") == 0
