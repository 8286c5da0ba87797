"""Model settings, retry/timeout policies and type-hinted tools on the real stack."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

import crux
from providers.loopback import (
    ErrorReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from tests.helpers import closed_run, new_worker, settings_for
from vocabulary.ids import workflow_id_for

STOP = "STOP-MARKER-7f3a"


async def _history_json(client: Client, workflow_id: str) -> str:
    """Every payload of the workflow's history, decoded, as one string."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            entries: dict[str, object] = node
            data = entries.get("data")
            if isinstance(data, str) and "metadata" in entries:
                found.append(base64.b64decode(data).decode("utf-8", "replace"))
            for child in entries.values():
                walk(child)
        elif isinstance(node, list):
            items: list[object] = node
            for child in items:
                walk(child)

    walk(history.to_json_dict())
    return "\n".join(found)


async def test_settings_reach_openai_merged_and_are_receipted_as_values(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    assistant = crux.prompt(
        id="tuned",
        settings={"temperature": 0.2, "stop": [STOP], "extra": {"openai": {"logprobs": True}}},
    )
    openai_server.enqueue(TextReply(text="Tuned."))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            assistant,
            input="Hello",
            thread=f"settings:{uuid.uuid4().hex[:6]}",
            model="openai:gpt-4o",
            settings=crux.model_settings(temperature=0.7, top_p=0.9, seed=11),
        )
        stored = await worker.runtime.receipt(result.steps[0].request.id)
        history = await _history_json(
            client, workflow_id_for(result.result.generation_id, result.result.thread_id)
        )

    [received] = openai_server.requests
    body = received.body
    assert (body["temperature"], body["top_p"], body["seed"], body["stop"]) == (
        0.7,
        0.9,
        11,
        [STOP],
    )
    assert body["logprobs"] is True
    record = result.steps[0].request.settings
    assert record is not None
    assert (record.temperature, record.top_p, record.seed, record.stop_count) == (0.7, 0.9, 11, 1)
    assert record.extra_fields == ("logprobs",)
    assert stored.settings == record
    # Stop sequences are caller text: the receipt keeps only their count.
    assert STOP not in stored.model_dump_json()
    # They are configuration: in the start event and the attempt's input (which sends
    # them), never in a result, a receipt or the recorded plan.
    assert history.count(STOP) == 2


async def test_anthropic_gets_stop_sequences_and_no_seed_which_the_receipt_names(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with LoopbackAnthropicServer() as server:
        server.enqueue(TextReply(text="Done."))
        settings = settings_for(database_url, anthropic_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            result = await worker.runtime.generate(
                "Hi",
                model="anthropic:claude-sonnet-4-5",
                settings={
                    "temperature": 0.5,
                    "stop": ["END"],
                    "seed": 3,
                    "extra": {"anthropic": {"top_k": 40}, "openai": {"logprobs": True}},
                },
            )
        [received] = [r for r in server.requests if r.path.endswith("/messages")]
    body = received.body
    assert body["stop_sequences"] == ["END"]
    assert body["temperature"] == 0.5 and body["top_k"] == 40
    assert "seed" not in body and "logprobs" not in body
    record = result.steps[0].request.settings
    assert record is not None
    assert record.ignored == ("seed",) and record.extra_fields == ("top_k",)


async def test_invalid_settings_fail_typed_at_the_facade_and_in_the_workflow(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        with pytest.raises(crux.ConfigurationError):
            await worker.runtime.generate("Hi", settings={"temperature": 3})
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": "g", "settings": {"top_p": 0, "stop": ["do-not-echo"]}},
            id=f"crux/gen/bad-settings/{uuid.uuid4().hex}",
            task_queue=worker.task_queue,
        )
        with pytest.raises(WorkflowFailureError) as raised:
            await asyncio.wait_for(handle.result(), 30)
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ConfigurationError"
    assert "settings" in str(cause) and "do-not-echo" not in str(cause)


async def test_attempt_policy_bounds_provider_attempts_per_runtime_and_per_call(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    failures = [ErrorReply(status=500, message="boom") for _ in range(3)]
    openai_server.enqueue(*failures)
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = crux.Runtime(
            client,
            pool,
            task_queue=worker.task_queue,
            attempt_policy={"max_attempts": 2, "initial_interval_seconds": 0.1},
        )
        with pytest.raises(crux.ProviderHTTPError) as raised:
            await runtime.generate("Hi", model="openai:gpt-4o")
        assert raised.value.status == 500
        assert len(openai_server.requests) == 2
        # A call raises the bound: the third failure is retried too, the fourth answers.
        openai_server.clear()  # drops the third failure, never asked for
        openai_server.enqueue(*failures, TextReply(text="Finally."))
        result = await runtime.generate(
            "Hi", model="openai:gpt-4o", attempt_policy={"max_attempts": 4}
        )
    assert result.text == "Finally."
    assert len(openai_server.requests) == 4


async def test_a_slow_tool_times_out_into_an_error_result_after_its_retries(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    runs: list[str] = []

    @crux.tool(timeout=0.3, retry={"max_attempts": 2, "initial_interval_seconds": 0.1})
    async def slow_lookup(key: str) -> str:
        """Look a key up slowly."""
        runs.append(key)
        await asyncio.sleep(5)
        return "never"

    assistant = crux.prompt(id="slow", use=[slow_lookup])
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="slow_lookup", arguments={"key": "k1"})),
        TextReply(text="The lookup timed out."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[slow_lookup]) as worker:
        result = await worker.runtime.generate(assistant, input="Look up k1", model="openai:gpt-4o")
        assert result.text == "The lookup timed out."
        assert runs == ["k1", "k1"]
        tool_message = openai_server.requests[1].body["messages"][-1]
        assert tool_message["role"] == "tool"
        assert tool_message["content"] == "error: the tool timed out after 0.3 seconds"
        # A plain Temporal client names the tool only: the policy declared with the tool
        # on the worker applies all the same.
        openai_server.clear()
        runs.clear()
        openai_server.enqueue(
            tool_call_reply(ScriptedToolCall(name="slow_lookup", arguments={"key": "k2"})),
            TextReply(text="Timed out again."),
        )
        plain_id = f"plain-{uuid.uuid4().hex[:8]}"
        await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": plain_id,
                "model": "openai:gpt-4o",
                "input": "Look up k2",
                "tools": ["slow_lookup"],
            },
            id=workflow_id_for(plain_id, None),
            task_queue=worker.task_queue,
            execution_timeout=timedelta(seconds=60),
        )
    assert runs == ["k2", "k2"]
    assert openai_server.requests[1].body["messages"][-1]["content"] == (
        "error: the tool timed out after 0.3 seconds"
    )


async def test_a_type_hinted_tool_round_validates_the_models_arguments(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[tuple[str, int]] = []

    @crux.tool
    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        """Forecast for a city.

        Args:
            city: City name.
            days: Days ahead.
        """
        calls.append((city, days))
        return {"city": city, "days": days, "sky": "clear"}

    assistant = crux.prompt(id="typed-weather", use=[get_weather])
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="get_weather", arguments={"city": "Porto", "days": 2}),
            ScriptedToolCall(name="get_weather", arguments={"days": "soon"}),
        ),
        TextReply(text="Clear in Porto."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[get_weather]) as worker:
        result = await worker.runtime.generate(
            assistant,
            input="Weather?",
            thread=f"typed:{uuid.uuid4().hex[:6]}",
            model="openai:gpt-4o",
        )
    assert result.text == "Clear in Porto."
    assert calls == [("Porto", 2)]
    first, second = (r.body for r in openai_server.requests)
    function = first["tools"][0]["function"]
    assert function["name"] == "get_weather"
    assert function["description"] == "Forecast for a city."
    assert function["parameters"]["properties"]["city"] == {
        "type": "string",
        "description": "City name.",
    }
    assert function["parameters"]["required"] == ["city"]
    valid, invalid = second["messages"][-2:]
    assert json.loads(valid["content"]) == {"city": "Porto", "days": 2, "sky": "clear"}
    assert invalid["content"] == "error: invalid arguments: city (missing), days (int_parsing)"
