"""Logs and Temporal payloads carry ids and sizes, never message text."""

from __future__ import annotations

import json
import logging
import uuid

import asyncpg
import pytest
from temporalio.client import Client

from crux.logs import configure_logging
from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import closed_run, new_worker, settings_for

SECRET_QUESTION = "My account number is 4242-SECRET-7777, can you check it?"
SECRET_REPLY = "Account 4242-SECRET-7777 looks fine to me."
PAYLOAD_LIMIT_BYTES = 16 * 1024


async def test_logs_of_a_generation_contain_no_message_text(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    configure_logging(log_format="json", level="debug")
    try:
        settings = settings_for(database_url, openai_base_url=openai_server.base_url)
        openai_server.enqueue(TextReply(text=SECRET_REPLY))
        async with new_worker(client, pool, settings) as worker:
            await worker.runtime.generate(
                SECRET_QUESTION, thread=f"logs:{uuid.uuid4().hex[:6]}", model="openai:gpt-4o"
            )
        captured = capfd.readouterr()
    finally:
        logging.getLogger().setLevel(logging.WARNING)
    output = captured.out + captured.err
    assert "thread.turn.committed" in output
    assert "provider.attempt.completed" in output
    assert "SECRET" not in output


async def test_every_payload_of_a_generation_stays_small(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"sizes:{uuid.uuid4().hex[:6]}"
    long_text = "lorem ipsum dolor sit amet " * 400
    openai_server.enqueue(*(TextReply(text=long_text) for _ in range(5)))
    async with new_worker(client, pool, settings) as worker:
        for turn in range(5):
            await worker.runtime.generate(
                long_text, thread=thread_id, model="openai:gpt-4o", generation_id=f"s{turn}"
            )
    history = await (await closed_run(client, workflow_id_for("s4", thread_id))).fetch_history()
    for event in json.loads(history.to_json())["events"]:
        assert len(json.dumps(event)) < PAYLOAD_LIMIT_BYTES, event["eventType"]
    assert "lorem" not in history.to_json()
