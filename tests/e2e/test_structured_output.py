"""Structured output on the real stack: native schemas, validation retries, no leaks."""

from __future__ import annotations

import base64
import contextlib
import uuid
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel, field_validator
from temporalio.client import Client

import crux
from contracts.generation import GenerationOutcome
from crux.errors import OutputValidationError
from providers.loopback import (
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage.threads._models import MessageEntry
from tests.helpers import new_worker, settings_for
from vocabulary.ids import workflow_id_for

CANARY = "CANARY-REJECTED-5d1e"


class Forecast(BaseModel):
    city: str
    high: int


async def _history_text(client: Client, workflow_id: str) -> str:
    """The workflow's history as JSON, with every payload decoded."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    parts = [history.to_json()]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            entries: dict[str, object] = node
            data = entries.get("data")
            if isinstance(data, str):
                with contextlib.suppress(ValueError):
                    parts.append(base64.b64decode(data).decode("utf-8", "replace"))
            for child in entries.values():
                walk(child)
        elif isinstance(node, list):
            items: list[object] = node
            for child in items:
                walk(child)

    walk(history.to_json_dict())
    return "\n".join(parts)


async def _database_text(pool: asyncpg.Pool) -> str:
    """Every row of every table outside the system schemas, as text."""
    async with pool.acquire() as connection:
        tables = await connection.fetch(
            "SELECT table_schema, table_name FROM information_schema.tables"
            " WHERE table_type = 'BASE TABLE'"
            " AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        rows: list[str] = []
        for table in tables:
            name = f'"{table["table_schema"]}"."{table["table_name"]}"'
            rows.extend(r[0] for r in await connection.fetch(f"SELECT t::text FROM {name} t"))
    assert rows, "the dump found no rows"
    return "\n".join(rows)


async def _receipt_chain(runtime: Any, request_id: str) -> list[Any]:
    chain = [await runtime.receipt(request_id)]
    while chain[-1].previous_request_id is not None:
        chain.append(await runtime.receipt(chain[-1].previous_request_id))
    return chain[::-1]


async def _assert_retried_and_clean(
    client: Client, pool: asyncpg.Pool, runtime: Any, result: crux.Generation
) -> None:
    assert isinstance(result.output, Forecast)
    assert result.output == Forecast(city="Oslo", high=21)
    final = result.steps[-1].request
    chain = await _receipt_chain(runtime, final.id)
    assert len(chain) == 3
    assert [r.previous_reason for r in chain] == [None, "validation-retry", "validation-retry"]
    inspection = await runtime.inspect(chain[0])
    sizes = {entry.name: entry.tokens for entry in inspection.breakdown.contributions}
    assert sizes["output-schema"] > 10
    assert result.result.thread_commit is not None
    history = await _history_text(
        client, workflow_id_for(result.result.generation_id, result.result.thread_id)
    )
    assert CANARY not in history
    assert CANARY not in await _database_text(pool)


async def test_openai_gets_the_schema_natively_and_invalid_answers_are_retried(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        TextReply(text=f"not json {CANARY}"),
        TextReply(text=f'{{"city": "{CANARY}", "high": "warm"}}'),
        TextReply(text='{"city": "Oslo", "high": 21}'),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread = f"structured:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            crux.prompt(id="forecast", output=Forecast),
            input="Weather in Oslo?",
            thread=thread,
            model="openai:gpt-4o",
        )
        await _assert_retried_and_clean(client, pool, worker.runtime, result)
    snapshot = await crux.thread(id=thread, storage=pool).read()
    roles = [e.role for e in snapshot.entries if isinstance(e, MessageEntry)]
    assert roles == ["user", "assistant"]
    bodies = [r.body for r in openai_server.requests]
    assert len(bodies) == 3
    for body in bodies:
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {
                "name": "Forecast",
                "schema": Forecast.model_json_schema(),
                "strict": True,
            },
        }


async def test_anthropic_gets_a_forced_output_tool_and_retries(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    def answer(arguments: dict[str, Any]) -> TextReply:
        return tool_call_reply(ScriptedToolCall(name="Forecast", arguments=arguments))

    async with LoopbackAnthropicServer() as server:
        server.enqueue(
            answer({"city": CANARY}),
            answer({"city": "Oslo", "high": CANARY}),
            answer({"city": "Oslo", "high": 21}),
        )
        settings = settings_for(database_url, anthropic_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            result = await worker.runtime.generate(
                "Weather in Oslo?",
                thread=f"structured:{uuid.uuid4().hex[:6]}",
                model="anthropic:claude-sonnet-4-5",
                output=Forecast,
            )
            await _assert_retried_and_clean(client, pool, worker.runtime, result)
        bodies = [r.body for r in server.requests if r.path.endswith("/messages")]
    assert len(bodies) == 3
    for body in bodies:
        assert body["tool_choice"] == {"type": "tool", "name": "Forecast"}
        [tool] = body["tools"]
        assert tool["name"] == "Forecast"
        assert tool["input_schema"] == Forecast.model_json_schema()


async def test_exhausted_retries_fail_typed_with_paths_only(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }
    openai_server.enqueue(
        TextReply(text=f'{{"x": "{CANARY}"}}'),
        TextReply(text=f'{{"y": "{CANARY}"}}'),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(OutputValidationError) as caught:
            await worker.runtime.generate(
                "Count.",
                model="openai:gpt-4o",
                output=crux.output_spec(schema, max_retries=1),
            )
    error = caught.value
    assert error.failures == (("$", "required"),)
    assert error.attempts == 2
    assert CANARY not in str(error)
    assert len(openai_server.requests) == 2
    assert CANARY not in await _database_text(pool)


class MildForecast(BaseModel):
    city: str
    high: int

    @field_validator("high")
    @classmethod
    def _mild(cls, value: int) -> int:
        # A rule the JSON schema cannot carry: only the pydantic model knows it.
        if value > 40:
            raise ValueError("too hot")
        return value


async def test_a_plain_client_is_validated_by_the_prompts_registered_model(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    registered = crux.prompt(id="mild-forecast", output=MildForecast)
    spec = crux.output_spec(MildForecast)
    openai_server.enqueue(
        TextReply(text='{"city": "Oslo", "high": 99}'),
        TextReply(text='{"city": "Oslo", "high": 19}'),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"structured:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings, prompts=[registered]) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": "plain1",
                "thread_id": thread_id,
                "prompt_id": "mild-forecast",
                "model": "openai:gpt-4o",
                "input": "Weather?",
                "output": spec.model_dump(mode="json"),
            },
            id=workflow_id_for("plain1", thread_id),
            task_queue=worker.task_queue,
        )
    outcome = GenerationOutcome.model_validate(raw)
    assert outcome.thread_commit is not None
    # The schema alone accepts 99; the registered model's validator rejected it.
    assert len(openai_server.requests) == 2
