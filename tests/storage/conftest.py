"""Fixtures for the Thread store tests: a store on each test's fresh database."""

from __future__ import annotations

import asyncpg
import pytest

from crux.messages import Message, ToolCallPart
from storage.threads import ThreadStore


@pytest.fixture
def store(pool: asyncpg.Pool) -> ThreadStore:
    return ThreadStore(pool)


def user(message_id: str | None, text: str = "hi", **extra: object) -> Message:
    return Message(id=message_id, role="user", content=text, **extra)  # type: ignore[arg-type]


def assistant(message_id: str | None, text: str = "ok", **extra: object) -> Message:
    return Message(id=message_id, role="assistant", content=text, **extra)  # type: ignore[arg-type]


def tool_call(message_id: str, call_id: str, name: str = "lookup") -> Message:
    return Message(
        id=message_id,
        role="assistant",
        content=[ToolCallPart(tool_call_id=call_id, tool_name=name, input={"q": 1})],
    )


def tool_result(message_id: str, call_id: str, text: str = "42") -> Message:
    return Message(
        id=message_id, role="tool", content=text, tool_call_id=call_id, tool_name="lookup"
    )
