"""Record histories of generations with model settings and retry/timeout policies.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `settings_*` histories, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import (
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_settings_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    @crux.tool(timeout=0.2, retry={"max_attempts": 2, "initial_interval_seconds": 0.1})
    async def slow(key: str) -> str:
        """A lookup that never answers in time."""
        await asyncio.sleep(2)
        return key

    @crux.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    thread_id = f"replay-settings:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        ErrorReply(status=500),
        TextReply(text="tuned"),
        tool_call_reply(
            ScriptedToolCall(name="slow", arguments={"key": "k"}),
            ScriptedToolCall(name="add", arguments={"a": 1, "b": 2}),
        ),
        TextReply(text="done"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[slow, add]) as worker:
        await worker.runtime.generate(
            crux.prompt(id="tuned", settings={"temperature": 0.3, "stop": ["END"]}),
            input="hello",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="s1",
            settings={"seed": 5, "extra": {"openai": {"logprobs": False}}},
            attempt_policy={"max_attempts": 3, "initial_interval_seconds": 0.1},
        )
        await worker.runtime.generate(
            crux.prompt(id="policies", use=[slow, add]),
            input="use the tools",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="s2",
        )
    for name, generation_id in (
        ("settings_attempt_policy", "s1"),
        ("settings_tool_policy", "s2"),
    ):
        await record_history(client, workflow_id_for(generation_id, thread_id), name)
