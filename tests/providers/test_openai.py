# pyright: standard
from __future__ import annotations

import pytest

from crux.errors import ContextOverflowError, ProviderHTTPError
from crux.messages import ImagePart, Message, TextPart, ToolCallPart
from providers import (
    ChatRequest,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
    ToolChoiceTool,
    ToolSpec,
    Usage,
)
from providers.loopback import ErrorReply, ScriptedToolCall, TextReply, tool_call_reply

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
