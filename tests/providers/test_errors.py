"""Status -> error-class table and failure modes, for both wire formats over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio

from crux.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderNotFoundError,
    ProviderResponseError,
    ProviderTimeoutError,
)
from crux.messages import Message
from providers import (
    AnthropicMessagesProvider,
    ChatProvider,
    ChatRequest,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
)
from providers._errors import error_from_response, parse_retry_after
from providers.loopback import (
    DisconnectReply,
    ErrorReply,
    HangReply,
    LoopbackServer,
    RawReply,
    ResetReply,
    StreamErrorReply,
    TextReply,
)

SECRET = "the user's secret prompt text"
REQUEST = ChatRequest(model="m", messages=[Message(role="user", content=SECRET)])


@dataclass
class Endpoint:
    name: str
    server: LoopbackServer
    provider: ChatProvider


@pytest_asyncio.fixture(params=["openai", "anthropic"])
async def endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    server: LoopbackServer
    async with httpx.AsyncClient(timeout=5.0) as http:
        if request.param == "openai":
            async with LoopbackOpenAIServer() as server:
                yield Endpoint("openai", server, OpenAIChatProvider(http, base_url=server.base_url))
        else:
            async with LoopbackAnthropicServer() as server:
                yield Endpoint(
                    "anthropic", server, AnthropicMessagesProvider(http, base_url=server.base_url)
                )


STATUS_TABLE = [
    # status, extra headers, retryable, retry_after
    (400, {}, False, None),
    (401, {}, False, None),
    (403, {}, False, None),
    (404, {}, False, None),
    (408, {}, True, None),
    (409, {}, True, None),
    (413, {}, False, None),
    (422, {}, False, None),
    (429, {"retry-after": "7"}, True, 7.0),
    (429, {"retry-after-ms": "1500", "retry-after": "9"}, True, 1.5),
    (500, {}, True, None),
    (502, {}, True, None),
    (503, {"retry-after": "2"}, True, 2.0),
    (504, {}, True, None),
    (529, {}, True, None),
    (500, {"x-should-retry": "false"}, False, None),
    (400, {"x-should-retry": "true"}, True, None),
]


@pytest.mark.parametrize(("status", "headers", "retryable", "retry_after"), STATUS_TABLE)
async def test_status_maps_to_error_class(
    endpoint: Endpoint,
    status: int,
    headers: dict[str, str],
    retryable: bool,
    retry_after: float | None,
) -> None:
    endpoint.server.enqueue(ErrorReply(status=status, headers=headers, message=SECRET))
    with pytest.raises(ProviderHTTPError) as caught:
        await endpoint.provider.complete(REQUEST)
    error = caught.value
    expected = {401: ProviderAuthError, 403: ProviderAuthError, 404: ProviderNotFoundError}
    assert type(error) is expected.get(status, ProviderHTTPError)
    assert error.status == status
    assert error.host is not None and error.host.startswith("127.0.0.1:")
    assert error.provider == endpoint.name
    assert error.status_code == status
    assert error.retryable is retryable
    assert error.retry_after == retry_after
    assert error.error_type  # the provider's error type is kept (content-free)
    assert SECRET not in str(error)
    assert SECRET not in repr(error.args)


@pytest.mark.parametrize("stream", [False, True])
async def test_error_status_is_classified_when_streaming_too(
    endpoint: Endpoint, stream: bool
) -> None:
    endpoint.server.enqueue(ErrorReply(status=529 if endpoint.name == "anthropic" else 503))
    with pytest.raises(ProviderHTTPError) as caught:
        await endpoint.provider.complete(REQUEST.model_copy(update={"stream": stream}))
    assert caught.value.retryable


async def test_in_stream_error_event_is_classified(endpoint: Endpoint) -> None:
    kind = "overloaded_error" if endpoint.name == "anthropic" else "server_error"
    endpoint.server.enqueue(StreamErrorReply(text="partial", error_type=kind, message=SECRET))
    with pytest.raises(ProviderHTTPError) as caught:
        await endpoint.provider.complete(REQUEST.model_copy(update={"stream": True}))
    assert caught.value.retryable
    assert caught.value.error_type == kind
    assert SECRET not in str(caught.value)


async def test_dropped_connection_is_a_retryable_connection_error(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(DisconnectReply())
    with pytest.raises(ProviderConnectionError) as caught:
        await endpoint.provider.complete(REQUEST)
    assert caught.value.retryable


async def test_refused_connection_is_a_retryable_connection_error() -> None:
    async with LoopbackOpenAIServer() as server:
        base_url = server.base_url
    async with httpx.AsyncClient() as http:
        provider = OpenAIChatProvider(http, base_url=base_url)
        with pytest.raises(ProviderConnectionError) as caught:
            await provider.complete(REQUEST)
    assert caught.value.retryable


async def test_slow_answer_is_a_retryable_timeout(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(TextReply(text="late", delay_seconds=0.5))
    async with httpx.AsyncClient(timeout=0.1) as http:
        provider = (
            OpenAIChatProvider(http, base_url=endpoint.server.base_url)
            if endpoint.name == "openai"
            else AnthropicMessagesProvider(http, base_url=endpoint.server.base_url)
        )
        with pytest.raises(ProviderTimeoutError) as caught:
            await provider.complete(REQUEST)
    assert caught.value.retryable


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b'{"unexpected": true}', b'{"choices": [], "content": 3}']
)
async def test_malformed_success_body_is_a_response_error(endpoint: Endpoint, body: bytes) -> None:
    endpoint.server.enqueue(RawReply(body=body))
    with pytest.raises(ProviderResponseError) as caught:
        await endpoint.provider.complete(REQUEST)
    assert not caught.value.retryable


async def test_no_hidden_retries(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(ErrorReply(status=503), TextReply(text="would succeed"))
    with pytest.raises(ProviderError):
        await endpoint.provider.complete(REQUEST)
    assert len(endpoint.server.requests) == 1


OVERFLOWS = [
    # (provider, status, body, requested, limit)
    (
        "openai",
        400,
        b'{"error": {"message": "This model\'s maximum context length is 128000 tokens. '
        b"However, your messages resulted in 130001 tokens. Please reduce the length of the "
        b'messages.", "type": "invalid_request_error", "param": "messages", '
        b'"code": "context_length_exceeded"}}',
        130001,
        128000,
    ),
    (
        "openai",  # vLLM
        400,
        b'{"object": "error", "message": "This model\'s maximum context length is 8192 tokens. '
        b'However, you requested 9000 tokens (8000 in the messages, 1000 in the completion).", '
        b'"type": "BadRequestError", "param": null, "code": 400}',
        9000,
        8192,
    ),
    (
        "openai",  # llama.cpp server
        400,
        b'{"error": {"code": 400, "message": "the request exceeds the available context size, '
        b'try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, '
        b'"n_ctx": 4096}}',
        5000,
        4096,
    ),
    (
        "anthropic",
        400,
        b'{"type": "error", "error": {"type": "invalid_request_error", "message": '
        b'"prompt is too long: 208310 tokens > 200000 maximum"}, "request_id": "req_1"}',
        208310,
        200000,
    ),
    (
        "anthropic",
        400,
        b'{"type": "error", "error": {"type": "invalid_request_error", "message": '
        b'"input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, '
        b'decrease input length or `max_tokens` and try again"}}',
        198000,
        191808,
    ),
]


@pytest.mark.parametrize(("provider", "status", "body", "requested", "limit"), OVERFLOWS)
def test_context_overflow_is_recognised(
    provider: str, status: int, body: bytes, requested: int | None, limit: int | None
) -> None:
    error = error_from_response(provider, status, httpx.Headers(), body)
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable
    assert error.requested_tokens == requested
    assert error.limit_tokens == limit


def test_vllm_error_body_shape_is_read() -> None:
    body = b'{"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}'
    error = error_from_response("openai", 400, httpx.Headers(), body)
    assert type(error) is ProviderHTTPError
    assert not error.retryable


async def test_context_overflow_over_http(endpoint: Endpoint) -> None:
    message = (
        "prompt is too long: 300000 tokens > 200000 maximum"
        if endpoint.name == "anthropic"
        else "This model's maximum context length is 1000 tokens. However, you requested 1200"
    )
    endpoint.server.enqueue(
        ErrorReply(
            status=400,
            code="context_length_exceeded" if endpoint.name == "openai" else None,
            message=message,
        )
    )
    with pytest.raises(ContextOverflowError):
        await endpoint.provider.complete(REQUEST)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        (
            {
                "retry-after": "Wed, 21 Oct 2015 07:28:30 GMT",
                "date": "Wed, 21 Oct 2015 07:28:00 GMT",
            },
            30.0,
        ),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-4"}, None),
        ({"retry-after-ms": "x", "retry-after": "2"}, 2.0),
        ({"retry-after": "999999999"}, None),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}, 360.0),
        (
            {
                "x-ratelimit-remaining-requests": "3",
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "1.5s",
            },
            1.5,
        ),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, 0.02),
        ({"x-ratelimit-remaining-tokens": "5", "x-ratelimit-reset-tokens": "20ms"}, None),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "soon"}, None),
        (
            {
                "retry-after": "2",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "9s",
            },
            2.0,
        ),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(httpx.Headers(headers)) == expected


TRUNCATED = {
    "openai": (
        b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"half an an"},'
        b'"finish_reason":null}]}\n\n'
    ),
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg","model":"m",'
        b'"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"half an an"}}\n\n'
    ),
}


async def test_a_stream_cut_short_is_a_retryable_connection_error(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(
        RawReply(body=TRUNCATED[endpoint.name], headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ProviderConnectionError) as caught:
        await endpoint.provider.complete(REQUEST.model_copy(update={"stream": True}))
    assert caught.value.retryable


def test_prose_in_error_type_fields_is_not_kept() -> None:
    body = (
        b'{"error": {"type": "the user said: ' + SECRET.encode() + b'", "code": "bad code!",'
        b' "message": "' + SECRET.encode() + b'"}}'
    )
    error = error_from_response("openai", 400, httpx.Headers(), body)
    assert error.error_type is None
    assert SECRET not in str(error)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reset_mid_response_is_a_retryable_connection_error(
    endpoint: Endpoint, stream: bool
) -> None:
    # Part of the body (a stream: part of an event) arrives, then a TCP reset.
    endpoint.server.enqueue(ResetReply(reply=TextReply(text=SECRET * 4), after_bytes=120))
    with pytest.raises(ProviderConnectionError) as caught:
        await endpoint.provider.complete(REQUEST.model_copy(update={"stream": stream}))
    assert caught.value.retryable
    assert SECRET not in str(caught.value)
    assert len(endpoint.server.requests) == 1


async def test_a_server_that_never_answers_is_a_retryable_timeout(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(HangReply())
    async with httpx.AsyncClient(timeout=0.2) as http:
        provider = (
            OpenAIChatProvider(http, base_url=endpoint.server.base_url)
            if endpoint.name == "openai"
            else AnthropicMessagesProvider(http, base_url=endpoint.server.base_url)
        )
        with pytest.raises(ProviderTimeoutError) as caught:
            await provider.complete(REQUEST)
    assert caught.value.retryable
    # The server answers the next request on a new connection as usual.
    endpoint.server.enqueue(TextReply(text="back"))
    assert (await endpoint.provider.complete(REQUEST)).message.text == "back"


async def test_requests_record_when_they_arrived(endpoint: Endpoint) -> None:
    endpoint.server.enqueue(TextReply(text="one"), TextReply(text="two"))
    await endpoint.provider.complete(REQUEST)
    await asyncio.sleep(0.05)
    await endpoint.provider.complete(REQUEST)
    first, second = endpoint.server.requests
    assert second.received_at - first.received_at >= 0.05
