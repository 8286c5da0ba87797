from __future__ import annotations

import httpx
import pytest

from crux.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from providers import (
    AnthropicMessagesProvider,
    ChatRequest,
    LoopbackAnthropicServer,
    StreamDone,
    TextDelta,
    ToolCallDelta,
    ToolChoiceTool,
    ToolSpec,
    Usage,
)
from providers.loopback import CountReply, RawReply, ScriptedToolCall, TextReply, tool_call_reply

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PIXEL = "data:image/png;base64,iVBORw0KGgo="


def _conversation() -> list[Message]:
    return [
        Message(role="system", content="Be brief."),
        Message(role="system", content="Use metric units."),
        Message(
            role="user",
            content=[TextPart(text="Weather in Paris and Rome? See map."), ImagePart(url=PIXEL)],
        ),
        Message(
            role="assistant",
            content=[
                ReasoningPart(text="private chain"),
                TextPart(text="Checking both."),
                ToolCallPart(
                    tool_call_id="toolu_1", tool_name="get_weather", input={"city": "Paris"}
                ),
                ToolCallPart(
                    tool_call_id="toolu_2", tool_name="get_weather", input={"city": "Rome"}
                ),
            ],
        ),
        Message(role="tool", tool_call_id="toolu_1", tool_name="get_weather", content="18C"),
        Message(
            role="tool",
            tool_call_id="toolu_2",
            tool_name="get_weather",
            content="unavailable",
            metadata={"is_error": True},
        ),
        Message(role="user", content="Thanks, and tomorrow?"),
    ]


async def test_sends_the_exact_body_and_headers(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: LoopbackAnthropicServer
) -> None:
    anthropic_server.enqueue(
        TextReply(
            text="Both mild.",
            input_tokens=900,
            output_tokens=4,
            cache_read_tokens=600,
            cache_write_tokens=200,
        )
    )
    response = await anthropic_provider.complete(
        ChatRequest(
            model="claude-sonnet-4-5",
            messages=_conversation(),
            tools=[WEATHER],
            tool_choice="required",
            temperature=0.0,
        )
    )
    sent = anthropic_server.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    assert "anthropic-beta" not in sent.headers
    assert sent.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [
            {"type": "text", "text": "Be brief."},
            {"type": "text", "text": "Use metric units."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris and Rome? See map."},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "unavailable",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Thanks, and tomorrow?"},
                ],
            },
        ],
        "temperature": 0.0,
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": WEATHER.parameters,
            }
        ],
        "tool_choice": {"type": "any"},
    }
    assert response.message == Message(role="assistant", content="Both mild.")
    assert response.finish_reason == "stop"
    assert response.provider_finish_reason == "end_turn"
    # Cache reads and writes are folded into input_tokens.
    assert response.usage == Usage(
        input_tokens=900, output_tokens=4, cache_read_tokens=600, cache_write_tokens=200
    )


@pytest.mark.parametrize("beta", [False, True])
async def test_structured_output(
    http: httpx.AsyncClient, anthropic_server: LoopbackAnthropicServer, beta: bool
) -> None:
    provider = AnthropicMessagesProvider(
        http,
        base_url=anthropic_server.base_url,
        headers={"anthropic-beta": "other-beta"},
        structured_output_beta=beta,
    )
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    await provider.complete(
        ChatRequest(
            model="claude-haiku-4-5",
            messages=[Message(role="user", content="ok?")],
            response_format=schema,
            max_output_tokens=32,
            tool_choice=ToolChoiceTool(name="x"),
        )
    )
    sent = anthropic_server.requests[-1]
    schema_format = {"type": "json_schema", "schema": schema}
    if beta:
        assert sent.headers["anthropic-beta"] == "other-beta,structured-outputs-2025-11-13"
        assert sent.body["output_format"] == schema_format
        assert "output_config" not in sent.body
    else:
        assert sent.headers["anthropic-beta"] == "other-beta"
        assert sent.body["output_config"] == {"format": schema_format}
        assert "output_format" not in sent.body
    assert "x-api-key" not in sent.headers
    assert sent.body["max_tokens"] == 32
    assert "tool_choice" not in sent.body  # no tools, so no tool choice
    assert "system" not in sent.body
    assert sent.body["messages"] == [{"role": "user", "content": "ok?"}]


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "context_overflow"),
        ("pause_turn", "other"),
    ],
)
async def test_stop_reasons_are_normalised(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: LoopbackAnthropicServer,
    stop_reason: str,
    finish: str,
) -> None:
    anthropic_server.enqueue(TextReply(text="x", finish_reason=stop_reason))
    response = await anthropic_provider.complete(
        ChatRequest(model="claude-haiku-4-5", messages=[Message(role="user", content="hi")])
    )
    assert response.finish_reason == finish
    assert response.provider_finish_reason == stop_reason


@pytest.mark.parametrize("chunk_size", [1, 2, 5, 13, None])
async def test_stream_split_at_awkward_boundaries(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: LoopbackAnthropicServer,
    chunk_size: int | None,
) -> None:
    anthropic_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(id="toolu_a", name="get_weather", arguments={"city": "Zürich — 東京"}),
            text="Let me check «that»…",
            input_tokens=400,
            output_tokens=30,
            cache_read_tokens=100,
            sse_chunk_size=chunk_size,
        )
    )
    events = [
        e
        async for e in anthropic_provider.stream(
            ChatRequest(model="claude-haiku-4-5", messages=_conversation(), tools=[WEATHER])
        )
    ]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me check «that»…"
    assert [
        (e.index, e.tool_call_id, e.tool_name) for e in events if isinstance(e, ToolCallDelta)
    ] == [(0, "toolu_a", "get_weather")]
    assert done.response.message == Message(
        role="assistant",
        content=[
            TextPart(text="Let me check «that»…"),
            ToolCallPart(
                tool_call_id="toolu_a", tool_name="get_weather", input={"city": "Zürich — 東京"}
            ),
        ],
    )
    assert done.response.finish_reason == "tool_calls"
    assert done.response.usage == Usage(input_tokens=400, output_tokens=30, cache_read_tokens=100)
    sent = anthropic_server.requests[-1]
    assert sent.body["stream"] is True
    assert sent.headers["accept"] == "text/event-stream"


async def test_thinking_blocks_are_kept_as_reasoning(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: LoopbackAnthropicServer
) -> None:
    anthropic_server.enqueue(
        RawReply(
            body=(
                b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",'
                b' "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},'
                b' {"type": "text", "text": "Yes."}], "stop_reason": "end_turn",'
                b' "usage": {"input_tokens": 3, "output_tokens": 2}}'
            )
        )
    )
    response = await anthropic_provider.complete(
        ChatRequest(model="claude", messages=[Message(role="user", content="?")])
    )
    assert response.message.content == [ReasoningPart(text="hmm"), TextPart(text="Yes.")]
    assert response.message.text == "Yes."


async def test_count_tokens_endpoint(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: LoopbackAnthropicServer
) -> None:
    anthropic_server.enqueue(CountReply(input_tokens=1234))
    tokens = await anthropic_provider.count_tokens(
        ChatRequest(
            model="claude-haiku-4-5",
            messages=_conversation(),
            tools=[WEATHER],
            max_output_tokens=100,
            temperature=0.5,
        )
    )
    assert tokens == 1234
    sent = anthropic_server.requests[-1]
    assert sent.path == "/v1/messages/count_tokens"
    assert set(sent.body) == {"model", "system", "messages", "tools"}


async def test_default_responder_counts_with_the_real_tokenizer(
    anthropic_provider: AnthropicMessagesProvider,
) -> None:
    response = await anthropic_provider.complete(
        ChatRequest(model="claude", messages=[Message(role="user", content="hello loopback")])
    )
    assert (
        response.message.text == '[loopback echo] I received 1 message; you said "hello loopback"'
    )
    assert response.usage.input_tokens > 0
    assert (
        await anthropic_provider.count_tokens(
            ChatRequest(model="claude", messages=[Message(role="user", content="hello loopback")])
        )
        > 0
    )


def test_empty_turns_are_dropped_and_neighbours_merged() -> None:
    from providers._anthropic_wire import encode_messages

    system, messages = encode_messages(
        [
            Message(role="system", content=""),
            Message(role="user", content="first"),
            Message(role="assistant", content=""),
            Message(role="assistant", content=[ReasoningPart(text="only thinking")]),
            Message(role="user", content="second"),
        ]
    )
    assert system == []
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        }
    ]


async def test_cache_prefix_marks_tools_system_and_newest_message(
    http: httpx.AsyncClient, anthropic_server: LoopbackAnthropicServer
) -> None:
    provider = AnthropicMessagesProvider(
        http, base_url=anthropic_server.base_url, cache_prefix=True
    )
    await provider.complete(
        ChatRequest(
            model="claude-haiku-4-5",
            messages=[
                Message(role="system", content="Be brief."),
                Message(role="user", content="first"),
                Message(role="assistant", content="ok"),
                Message(role="user", content="second"),
            ],
            tools=[WEATHER],
        )
    )
    body = anthropic_server.requests[-1].body
    ephemeral = {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": ephemeral}]
    assert body["messages"][0] == {"role": "user", "content": "first"}
    assert body["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "second", "cache_control": ephemeral}],
    }
