"""Tool rounds: each provider call planned again, the whole exchange committed as one group."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from temporalio.client import Client

import crux
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import ThreadStore
from tests.helpers import new_worker, settings_for

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


async def test_tool_round_commits_user_call_result_and_answer_as_one_group(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []

    async def weather(arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments)
        return {"city": arguments["city"], "forecast": "sunny", "high_c": 24}

    weather_tool = crux.tool(
        "get_weather", weather, description="Forecast for a city", parameters=WEATHER_SCHEMA
    )
    assistant = crux.prompt(id="weather", use=[weather_tool])
    thread_id = f"tools:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="get_weather", arguments={"city": "Lisbon"})),
        TextReply(text="Sunny in Lisbon, up to 24 degrees."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[weather_tool]) as worker:
        result = await worker.runtime.generate(
            assistant, input="Weather in Lisbon?", thread=thread_id, model="openai:gpt-4o"
        )

    assert calls == [{"city": "Lisbon"}]
    assert result.text == "Sunny in Lisbon, up to 24 degrees."
    assert len(result.steps) == 2
    first, second = (step.request for step in result.steps)
    assert second.previous_request_id == first.id
    assert second.input_tokens > first.input_tokens
    commit = result.thread_commit
    assert commit is not None
    assert len(commit.message_ids) == 4
    messages = await ThreadStore(pool).load_messages(thread_id, commit.message_ids)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].tool_calls[0].tool_name == "get_weather"
    assert messages[2].tool_call_id == messages[1].tool_calls[0].tool_call_id
    assert '"forecast":"sunny"' in messages[2].text
    second_request = openai_server.requests[1].body
    assert [m["role"] for m in second_request["messages"]] == ["user", "assistant", "tool"]
    assert second_request["tools"][0]["function"]["name"] == "get_weather"


async def test_tool_failures_reach_the_model_without_content_and_rounds_are_bounded(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    def broken(arguments: dict[str, Any]) -> str:
        raise RuntimeError("secret internal detail")

    broken_tool = crux.tool("lookup", broken)
    assistant = crux.prompt(id="lookup", use=[broken_tool])
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="lookup")),
        # A model that ignores tool_choice "none": its calls are dropped, its text kept.
        tool_call_reply(ScriptedToolCall(name="lookup"), text="I could not look that up."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[broken_tool]) as worker:
        result = await worker.runtime.generate(
            assistant,
            input="Look it up",
            thread=f"toolfail:{uuid.uuid4().hex[:6]}",
            model="openai:gpt-4o",
            max_tool_rounds=1,
        )
    assert result.text == "I could not look that up."
    assert result.thread_commit is not None
    assert len(result.thread_commit.message_ids) == 4
    bodies = [r.body for r in openai_server.requests]
    tool_message = bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "RuntimeError" in tool_message["content"]
    assert "secret internal detail" not in tool_message["content"]
    # After the single allowed round the model is told to answer without tools.
    assert bodies[1]["tool_choice"] == "none"
    assert len(result.steps) == 2
