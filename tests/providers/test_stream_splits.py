"""Streams cut at arbitrary byte positions assemble to the same reply (httpx MockTransport)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crux.messages import Message
from providers import (
    AnthropicMessagesProvider,
    ChatRequest,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
)
from providers.loopback import LoopbackServer, RecordedRequest, ScriptedToolCall, tool_call_reply

REPLY = tool_call_reply(
    ScriptedToolCall(id="call_1", name="lookup", arguments={"q": "Zürich 東京 🚀"}),
    ScriptedToolCall(id="call_2", name="lookup", arguments={"q": "second"}),
    text="Voilà — «quoted» 日本語 text…",
    input_tokens=10,
    output_tokens=5,
)
REQUEST = ChatRequest(model="m", messages=[Message(role="user", content="hi")], stream=True)


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]):
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def _stream_bytes(server: LoopbackServer, path: str, body: dict) -> bytes:
    recorded = RecordedRequest("POST", path, {}, b"", body)
    response = server.render(recorded, REPLY)
    assert response.chunks is not None
    return b"".join(response.chunks)


def _client(data: bytes, cuts: list[int]) -> httpx.AsyncClient:
    points = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    pieces = [data[a:b] for a, b in zip(points, points[1:], strict=False)]

    def handler(request: httpx.Request) -> httpx.Response:
        del request
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Pieces(pieces))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


OPENAI_BYTES = _stream_bytes(
    LoopbackOpenAIServer(),
    "/v1/chat/completions",
    {"model": "m", "stream": True, "stream_options": {"include_usage": True}},
)
ANTHROPIC_BYTES = _stream_bytes(
    LoopbackAnthropicServer(), "/v1/messages", {"model": "m", "stream": True}
)
CUTS = st.lists(st.integers(min_value=0, max_value=10_000), max_size=40)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


async def _openai(cuts: list[int]):
    async with _client(OPENAI_BYTES, cuts) as http:
        return await OpenAIChatProvider(http, base_url="http://test/v1").complete(REQUEST)


async def _anthropic(cuts: list[int]):
    async with _client(ANTHROPIC_BYTES, cuts) as http:
        return await AnthropicMessagesProvider(http, base_url="http://test/v1").complete(REQUEST)


@SETTINGS
@given(cuts=CUTS)
async def test_openai_stream_any_cuts(cuts: list[int]) -> None:
    assert await _openai(cuts) == await _openai([])


@SETTINGS
@given(cuts=CUTS)
async def test_anthropic_stream_any_cuts(cuts: list[int]) -> None:
    assert await _anthropic(cuts) == await _anthropic([])


async def test_unsplit_streams_decode_to_the_scripted_reply() -> None:
    for response in (await _openai([]), await _anthropic([])):
        assert response.message.text == REPLY.text
        calls = [(c.tool_call_id, c.tool_name, c.input) for c in response.message.tool_calls]
        assert calls == [
            ("call_1", "lookup", {"q": "Zürich 東京 🚀"}),
            ("call_2", "lookup", {"q": "second"}),
        ]
        assert response.finish_reason == "tool_calls"
        assert json.dumps(response.usage.model_dump()) == json.dumps(
            {
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
            }
        )
