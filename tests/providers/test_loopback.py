"""The loopback servers themselves: validation like the real APIs, keep-alive, chunked bodies."""

from __future__ import annotations

import httpx
import pytest

from crux.errors import ProviderHTTPError
from crux.messages import Message, TextPart, ToolCallPart
from providers import (
    AnthropicMessagesProvider,
    ChatRequest,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
)
from providers.loopback import TextReply
from providers.loopback._validate import anthropic_problem, openai_problem

CALL = ToolCallPart(tool_call_id="c1", tool_name="lookup", input={})
ORPHAN_RESULT = [
    Message(role="user", content="hi"),
    Message(role="tool", tool_call_id="c1", content="result without its call"),
]
UNANSWERED_CALL = [
    Message(role="user", content="hi"),
    Message(role="assistant", content=[CALL]),
    Message(role="user", content="moving on"),
]


@pytest.mark.parametrize("messages", [ORPHAN_RESULT, UNANSWERED_CALL])
async def test_openai_loopback_rejects_unpaired_tool_messages_like_the_api(
    http: httpx.AsyncClient, messages: list[Message]
) -> None:
    async with LoopbackOpenAIServer() as server:
        server.enqueue(TextReply(text="kept for the next valid request"))
        provider = OpenAIChatProvider(http, base_url=server.base_url)
        with pytest.raises(ProviderHTTPError) as caught:
            await provider.complete(ChatRequest(model="m", messages=messages))
        assert caught.value.status_code == 400
        assert not caught.value.retryable
        assert server.pending == 1


@pytest.mark.parametrize("messages", [ORPHAN_RESULT, UNANSWERED_CALL])
async def test_anthropic_loopback_rejects_unpaired_tool_blocks_like_the_api(
    http: httpx.AsyncClient, messages: list[Message]
) -> None:
    async with LoopbackAnthropicServer() as server:
        provider = AnthropicMessagesProvider(http, base_url=server.base_url)
        with pytest.raises(ProviderHTTPError) as caught:
            await provider.complete(ChatRequest(model="m", messages=messages))
        assert caught.value.status_code == 400
        assert caught.value.error_type == "invalid_request_error"


async def test_validation_can_be_switched_off(http: httpx.AsyncClient) -> None:
    async with LoopbackOpenAIServer(validate=False) as server:
        provider = OpenAIChatProvider(http, base_url=server.base_url)
        response = await provider.complete(ChatRequest(model="m", messages=ORPHAN_RESULT))
        assert response.finish_reason == "stop"


def test_validators_accept_complete_tool_rounds() -> None:
    openai_body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "assistant", "content": "done"},
        ],
    }
    assert openai_problem(openai_body) is None
    anthropic_body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
        ],
    }
    assert anthropic_problem(anthropic_body) is None
    assert anthropic_problem({**anthropic_body, "max_tokens": None}) is not None
    assert anthropic_problem({**anthropic_body, "messages": anthropic_body["messages"][:1] * 2})


async def test_keep_alive_serves_many_requests_on_one_connection(
    http: httpx.AsyncClient,
) -> None:
    async with LoopbackOpenAIServer() as server:
        provider = OpenAIChatProvider(http, base_url=server.base_url)
        request = ChatRequest(model="m", messages=[Message(role="user", content="hi")])
        for _ in range(5):
            await provider.complete(request)
        assert len(server.requests) == 5
        assert all(r.headers.get("connection") != "close" for r in server.requests)


async def test_chunked_request_bodies_are_read() -> None:
    async def body():
        yield b'{"model": "m", "messages": '
        yield b'[{"role": "user", "content": "chunked"}]}'

    async with LoopbackOpenAIServer() as server, httpx.AsyncClient() as http:
        response = await http.post(f"{server.base_url}/chat/completions", content=body())
        assert response.status_code == 200
        assert server.requests[-1].headers["transfer-encoding"] == "chunked"
        assert server.requests[-1].body["messages"][0]["content"] == "chunked"


async def test_unknown_paths_get_a_provider_shaped_404() -> None:
    async with LoopbackAnthropicServer() as server, httpx.AsyncClient() as http:
        response = await http.post(f"{server.base_url}/nope", json={})
        assert response.status_code == 404
        assert response.json()["error"]["type"] == "not_found_error"


def test_base_url_is_loopback_only_while_running() -> None:
    server = LoopbackOpenAIServer()
    with pytest.raises(RuntimeError):
        _ = server.base_url


async def test_clear_forgets_requests_and_queue(http: httpx.AsyncClient) -> None:
    async with LoopbackOpenAIServer() as server:
        server.enqueue(TextReply(text="x"))
        await OpenAIChatProvider(http, base_url=server.base_url).complete(
            ChatRequest(model="m", messages=[Message(role="user", content=[TextPart(text="a")])])
        )
        server.enqueue(TextReply(text="y"))
        server.clear()
        assert server.requests == []
        assert server.pending == 0
        assert server.base_url.startswith("http://127.0.0.1:")
