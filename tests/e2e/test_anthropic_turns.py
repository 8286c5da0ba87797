"""Managed turns through the Anthropic Messages adapter, on a loopback server."""

from __future__ import annotations

import uuid

import asyncpg
from temporalio.client import Client

import crux
from providers.loopback import LoopbackAnthropicServer, TextReply
from tests.helpers import new_worker, settings_for

MODEL = "anthropic:claude-sonnet-4-5"


async def test_two_turns_with_system_prompt_and_conservative_measurement(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with LoopbackAnthropicServer() as server:
        server.enqueue(TextReply(text="Bonjour."), TextReply(text="Au revoir."))
        settings = settings_for(database_url, anthropic_base_url=server.base_url)
        polite = crux.prompt(id="polite", system="Answer in French.")
        thread_id = f"anthropic:{uuid.uuid4().hex[:6]}"
        async with new_worker(client, pool, settings) as worker:
            first = await worker.runtime.generate(
                polite, input="Hello", thread=thread_id, model=MODEL
            )
            second = await worker.runtime.generate(
                polite, input="Goodbye", thread=thread_id, model=MODEL
            )
        bodies = [r.body for r in server.requests]
        headers = server.requests[0].headers
    assert (first.text, second.text) == ("Bonjour.", "Au revoir.")
    assert bodies[1]["system"] in (
        "Answer in French.",
        [{"type": "text", "text": "Answer in French."}],
    )
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant", "user"]
    assert headers["anthropic-version"]
    assert headers["x-api-key"] == "sk-ant-test-not-a-secret"
    # No Claude tokenizer offline: counts are conservative and the margin says so.
    assert second.steps[0].request.measurement == "conservative"
    assert second.thread_commit is not None
    assert second.thread_commit.parent_id == first.result.output_message_id
