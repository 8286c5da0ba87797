from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from crux.errors import ContextOverflowError, ProviderHTTPError
from crux.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from providers import (
    ChatRequest,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
    StreamDone,
    SummaryRequest,
    TextDelta,
    ToolCallDelta,
    ToolChoiceTool,
    ToolSpec,
    Usage,
)
from providers.loopback import (
    CountReply,
    ErrorReply,
    RawReply,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _conversation() -> list[Message]:
    return [
        Message(role="system", content="Be brief."),
        Message(
            role="user",
            content=[
                TextPart(text="What is in this picture, and the weather in Paris?"),
                ImagePart(url="https://example.test/cat.png", detail="low"),
            ],
        ),
        Message(
            role="assistant",
            content=[
                TextPart(text="Checking."),
                ToolCallPart(
                    tool_call_id="call_1", tool_name="get_weather", input={"city": "Paris"}
                ),
            ],
        ),
        Message(role="tool", tool_call_id="call_1", tool_name="get_weather", content="18C, sunny"),
    ]


async def test_sends_the_exact_body_and_headers(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(TextReply(text="A cat; 18C.", input_tokens=120, output_tokens=6))
    request = ChatRequest(
        model="gpt-4o",
        messages=_conversation(),
        max_output_tokens=256,
        tools=[WEATHER],
        tool_choice=ToolChoiceTool(name="get_weather"),
        temperature=0.2,
    )

    response = await openai_provider.complete(request)

    sent = openai_server.requests[-1]
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-team"] == "crux"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather in Paris?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.test/cat.png", "detail": "low"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
        ],
        "max_completion_tokens": 256,
        "temperature": 0.2,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    assert response.message == Message(role="assistant", content="A cat; 18C.")
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=120, output_tokens=6)
    assert response.model == "gpt-4o"
    assert response.response_id is not None


async def test_decodes_tool_calls(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(id="call_a", name="get_weather", arguments={"city": "Oslo"}),
            ScriptedToolCall(id="call_b", name="get_weather", arguments='{"city": "Rome"'),
        )
    )
    response = await openai_provider.complete(
        ChatRequest(model="gpt-4o", messages=_conversation()[:2], tools=[WEATHER])
    )
    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == [
        ToolCallPart(tool_call_id="call_a", tool_name="get_weather", input={"city": "Oslo"}),
        ToolCallPart(
            tool_call_id="call_b", tool_name="get_weather", input={"_raw": '{"city": "Rome"'}
        ),
    ]


async def test_rate_limit_is_retryable_with_retry_after(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(ErrorReply(status=429, headers={"retry-after": "3"}))
    with pytest.raises(ProviderHTTPError) as caught:
        await openai_provider.complete(ChatRequest(model="gpt-4o", messages=_conversation()[:2]))
    assert caught.value.retryable
    assert caught.value.retry_after == 3.0
    assert caught.value.status_code == 429


async def test_context_overflow_has_its_own_type_and_no_prompt_text(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        ErrorReply(
            status=400,
            code="context_length_exceeded",
            message=(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130512 tokens. SECRET-PROMPT-TEXT"
            ),
        )
    )
    with pytest.raises(ContextOverflowError) as caught:
        await openai_provider.complete(ChatRequest(model="gpt-4o", messages=_conversation()[:2]))
    assert not caught.value.retryable
    assert caught.value.limit_tokens == 128000
    assert caught.value.requested_tokens == 130512
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 64, None])
async def test_stream_split_at_awkward_boundaries_assembles_text_and_tool_calls(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer, chunk_size: int | None
) -> None:
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(id="call_x", name="get_weather", arguments={"city": "Zürich — 東京"}),
            ScriptedToolCall(id="call_y", name="get_time", arguments={"tz": "Asia/Tokyo"}),
            text="Looking up «both» cities…",
            input_tokens=50,
            output_tokens=20,
            cache_read_tokens=32,
            sse_chunk_size=chunk_size,
        )
    )
    events = [
        e
        async for e in openai_provider.stream(
            ChatRequest(model="gpt-4o", messages=_conversation()[:2], tools=[WEATHER])
        )
    ]
    assert isinstance(events[-1], StreamDone)
    response = events[-1].response
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Looking up «both» cities…"
    assert [
        (e.index, e.tool_call_id, e.tool_name) for e in events if isinstance(e, ToolCallDelta)
    ] == [
        (0, "call_x", "get_weather"),
        (1, "call_y", "get_time"),
    ]
    assert response.message == Message(
        role="assistant",
        content=[
            TextPart(text="Looking up «both» cities…"),
            ToolCallPart(
                tool_call_id="call_x", tool_name="get_weather", input={"city": "Zürich — 東京"}
            ),
            ToolCallPart(tool_call_id="call_y", tool_name="get_time", input={"tz": "Asia/Tokyo"}),
        ],
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=50, output_tokens=20, cache_read_tokens=32)
    sent = openai_server.requests[-1]
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}


async def test_complete_with_stream_flag_returns_the_assembled_reply(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        TextReply(text="streamed answer", finish_reason="length", sse_chunk_size=5)
    )
    response = await openai_provider.complete(
        ChatRequest(model="gpt-4o", messages=_conversation()[:2], stream=True)
    )
    assert response.message.text == "streamed answer"
    assert response.finish_reason == "length"
    assert response.provider_finish_reason == "length"


async def test_structured_output_and_max_tokens_field(
    http: httpx.AsyncClient, openai_server: LoopbackOpenAIServer
) -> None:
    provider = OpenAIChatProvider(
        http, base_url=openai_server.base_url + "/", max_tokens_field="max_tokens"
    )
    schema = {
        "title": "Weather report",
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
        "additionalProperties": False,
    }
    openai_server.enqueue(TextReply(text='{"celsius": 18}'))
    response = await provider.complete(
        ChatRequest(
            model="llama3",
            messages=[Message(role="user", content="weather?")],
            max_output_tokens=64,
            response_format=schema,
            tool_choice="none",
        )
    )
    sent = openai_server.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "llama3",
        "messages": [{"role": "user", "content": "weather?"}],
        "max_tokens": 64,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Weather_report", "schema": schema, "strict": True},
        },
    }
    assert response.message.text == '{"celsius": 18}'


async def test_refusal_is_reported_as_refusal(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    openai_server.enqueue(RawReply(body=json.dumps(body).encode()))
    response = await openai_provider.complete(
        ChatRequest(model="gpt-4o", messages=_conversation()[:2])
    )
    assert response.finish_reason == "refusal"
    assert response.message.text == "I can't help."


async def test_authoritative_input_token_count_uses_the_responses_shape(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(CountReply(input_tokens=321))
    tokens = await openai_provider.count_tokens(
        ChatRequest(model="gpt-4o", messages=_conversation(), tools=[WEATHER], tool_choice="auto")
    )
    assert tokens == 321
    sent = openai_server.requests[-1]
    assert sent.path == "/v1/responses/input_tokens"
    assert sent.body == {
        "model": "gpt-4o",
        "input": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "What is in this picture, and the weather in Paris?",
                    },
                    {
                        "type": "input_image",
                        "image_url": "https://example.test/cat.png",
                        "detail": "low",
                    },
                ],
            },
            {"role": "assistant", "content": "Checking."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C, sunny"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            }
        ],
        "tool_choice": "auto",
    }


async def test_default_responder_echoes_the_request_shape(
    openai_provider: OpenAIChatProvider,
) -> None:
    response = await openai_provider.complete(
        ChatRequest(model="gpt-4o", messages=_conversation()[:2])
    )
    assert response.message.text == (
        '[loopback echo] I received 2 messages; you said "What is in this picture, and the weather"'
    )
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


async def test_openai_adapter_offers_no_native_summary(
    openai_provider: OpenAIChatProvider,
) -> None:
    request = SummaryRequest(model="gpt-4o", messages=_conversation())
    assert await openai_provider.summarize(request) is None


async def test_stream_usage_can_be_turned_off_for_servers_without_it(
    http: httpx.AsyncClient, openai_server: LoopbackOpenAIServer
) -> None:
    provider = OpenAIChatProvider(http, base_url=openai_server.base_url, stream_usage=False)
    response = await provider.complete(
        ChatRequest(model="m", messages=[Message(role="user", content="hi")], stream=True)
    )
    assert "stream_options" not in openai_server.requests[-1].body
    assert response.usage == Usage(input_tokens=0, output_tokens=0)
    assert response.message.text.startswith("[loopback echo]")


async def test_reasoning_from_compatible_servers_is_kept(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    body = {
        "id": "c",
        "model": "qwen3",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Paris."}],
                    "reasoning_content": "The capital of France is Paris.",
                },
                "finish_reason": "stop",
            }
        ],
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "think "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "more"}}]},
        {"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]},
    ]
    stream = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    openai_server.enqueue(
        RawReply(body=json.dumps(body).encode()),
        RawReply(body=stream + b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}),
    )
    request = ChatRequest(model="qwen3", messages=[Message(role="user", content="capital?")])
    plain = await openai_provider.complete(request)
    assert plain.message.content == [
        ReasoningPart(text="The capital of France is Paris."),
        TextPart(text="Paris."),
    ]
    streamed = await openai_provider.complete(request.model_copy(update={"stream": True}))
    assert streamed.message.content == [ReasoningPart(text="think more"), TextPart(text="Done.")]
    assert streamed.usage == Usage(input_tokens=0, output_tokens=0)


async def test_extra_body_fields_are_sent_but_never_override_ours(
    http: httpx.AsyncClient, openai_server: LoopbackOpenAIServer
) -> None:
    provider = OpenAIChatProvider(
        http,
        base_url=openai_server.base_url,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}, "model": "ignored"},
    )
    await provider.complete(
        ChatRequest(model="qwen3", messages=[Message(role="user", content="x")])
    )
    sent = openai_server.requests[-1].body
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["model"] == "qwen3"


async def test_abandoning_a_stream_releases_the_connection(
    openai_provider: OpenAIChatProvider, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(TextReply(text="a long streamed answer " * 20, sse_chunk_size=16))
    request = ChatRequest(model="m", messages=[Message(role="user", content="hi")])
    events = openai_provider.stream(request)
    async for event in events:
        if isinstance(event, TextDelta):
            break
    await events.aclose()
    response = await openai_provider.complete(request)
    assert response.message.text.startswith("[loopback echo]")


@pytest.mark.parametrize(
    ("base_url", "configured", "expected"),
    [
        ("https://api.openai.com/v1", "auto", {"max_completion_tokens": 120}),
        ("http://127.0.0.1:8080/v1", "auto", {"max_tokens": 120}),
        ("http://ollama.internal:11434/v1", "auto", {"max_tokens": 120}),
        ("https://api.openai.com/v1", "max_tokens", {"max_tokens": 120}),
        ("http://127.0.0.1:8080/v1", "max_completion_tokens", {"max_completion_tokens": 120}),
        ("http://127.0.0.1:8080/v1", "both", {"max_tokens": 120, "max_completion_tokens": 120}),
    ],
)
def test_output_cap_field_follows_the_host(
    http: httpx.AsyncClient, base_url: str, configured: Any, expected: dict[str, int]
) -> None:
    provider = OpenAIChatProvider(http, base_url=base_url, max_tokens_field=configured)
    body = provider.encode(
        ChatRequest(model="m", messages=[Message(role="user", content="hi")], max_output_tokens=120)
    )
    caps = {k: v for k, v in body.items() if k in ("max_tokens", "max_completion_tokens")}
    assert caps == expected


async def test_output_cap_reaches_a_compatible_server_as_max_tokens(
    http: httpx.AsyncClient, openai_server: LoopbackOpenAIServer
) -> None:
    # A llama.cpp/vLLM/Ollama server on any non-OpenAI host reads only `max_tokens`.
    provider = OpenAIChatProvider(http, base_url=openai_server.base_url)
    openai_server.enqueue(TextReply(text="short"))
    await provider.complete(
        ChatRequest(
            model="local", messages=[Message(role="user", content="hi")], max_output_tokens=120
        )
    )
    body = openai_server.requests[-1].body
    assert body["max_tokens"] == 120
    assert "max_completion_tokens" not in body
