"""Our additive estimate against tiktoken's count of the exact serialized request text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crux.messages import ImagePart
from providers import TokenCounter, estimate_request
from providers._encodings import load_encoding
from providers._openai_wire import encode_request
from providers.counting import (
    ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS,
    OPENAI_TOKENS_PER_MESSAGE,
    OPENAI_TOKENS_PER_REQUEST,
    OPENAI_TOKENS_PER_TOOL,
    OPENAI_TOKENS_PER_TOOL_CALL,
)
from providers.types import ChatRequest
from tests.providers.corpus import build_corpus

# Published image costs for the corpus's images (OpenAI GPT-4o family sizing rules).
IMAGE_TOKENS = {("low", None): 85, (None, (1024, 768)): 765}


def _serialized_text(body: dict[str, Any]) -> tuple[str, int]:
    """The request text the model conditions on, and the fixed (non-text) framing tokens."""
    pieces: list[str] = []
    fixed = OPENAI_TOKENS_PER_REQUEST
    for message in body["messages"]:
        fixed += OPENAI_TOKENS_PER_MESSAGE
        content = message.get("content")
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            pieces.extend(part["text"] for part in content if part["type"] == "text")
        for call in message.get("tool_calls", []):
            fixed += OPENAI_TOKENS_PER_TOOL_CALL
            pieces.append(call["function"]["name"])
            pieces.append(call["function"]["arguments"])
    for tool in body.get("tools", []):
        fixed += OPENAI_TOKENS_PER_TOOL
        pieces.append(json.dumps(tool["function"], separators=(",", ":"), ensure_ascii=False))
    return "\n".join(pieces), fixed


def _image_tokens(request: ChatRequest) -> int:
    total = 0
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, ImagePart):
                size = (part.width, part.height) if part.width and part.height else None
                total += IMAGE_TOKENS[(part.detail, size)]
    return total


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_estimate_is_within_two_percent_of_the_serialized_request(encoding: str) -> None:
    counter = TokenCounter.for_encoding(encoding)
    reference = load_encoding(encoding)
    corpus = build_corpus()
    assert any(r.tools for r in corpus)
    assert any(m.role == "tool" for r in corpus for m in r.messages)
    assert any(_image_tokens(r) for r in corpus)
    worst = 0.0
    for request in corpus:
        text, fixed = _serialized_text(encode_request(request))
        expected = len(reference.encode(text, disallowed_special=())) + fixed
        expected += _image_tokens(request)
        estimate = estimate_request(request, counter).total
        error = abs(estimate - expected) / expected
        worst = max(worst, error)
        assert error <= 0.02, (estimate, expected)
    print(f"{encoding}: worst relative error {worst:.4%} over {len(corpus)} requests")


def test_cached_counts_are_used_instead_of_tokenizing_again() -> None:
    counter = TokenCounter.for_encoding("o200k_base")
    request = build_corpus(size=1)[0]
    first = estimate_request(request, counter)
    known = {m.id: n for m, n in zip(request.messages, first.messages, strict=True) if m.id}
    before = counter.tokenizations
    second = estimate_request(request, counter, known=known)
    assert second == first
    # Messages come from `known` and tool definitions from the per-process memo.
    assert counter.tokenizations == before


def test_anthropic_estimates_are_conservative_and_include_the_tool_prompt() -> None:
    counter = TokenCounter.for_encoding("anthropic")
    assert counter.message_format == "anthropic"
    assert counter.tokenizer_name == "cl100k_base"
    assert counter.confidence == "conservative"
    request = next(r for r in build_corpus() if r.tools)
    estimate = estimate_request(request, counter)
    assert estimate.tools > ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS
    assert estimate.confidence == "conservative"
