"""Token counting with tiktoken, per encoding, in activities only.

A `TokenCounter` is bound to one encoding name (the key under which counts are stored with
messages) and one message format (OpenAI-style or Anthropic-style overheads). When the name is
not an encoding we can build offline (Anthropic models, open-weight models), the counter falls
back to `cl100k_base` and lowers its `confidence` to `conservative`.

`count_message` returns a message's content tokens (text, tool-call names and JSON arguments,
media estimates): the number stored with the message and read by the planner, which adds
framing itself. `estimate_request` adds the documented framing per provider format:

| format | per message | per tool call | per request | per tool |
| --- | --- | --- | --- | --- |
| `openai` | 3 (role, separators) | 3 | 3 (reply priming) | JSON of the function + 8 |
| `anthropic` | 4 (estimate) | 4 (estimate) | 4 (estimate) | JSON of the tool + 8; 346 once |

The OpenAI numbers follow OpenAI's published counting guide for chat models. Against
tiktoken's count of the serialized request text the additive estimate stays within 2 % (the
test corpus's worst case is about 0.6 %), so OpenAI-family counts are `estimated`.

Anthropic does not publish its tokenizer. Anthropic-format counts use `cl100k_base` text
counts, the framing above and Anthropic's documented tool-prompt size, with `conservative`
confidence (the planner's 10 % margin). Claude's tokenizer usually yields more tokens than
`cl100k_base` for the same text, more so for code and non-English text, so near a limit the
authoritative `count_tokens` endpoint should decide, and a provider rejection still surfaces
as `ContextOverflowError` for one linked recovery request.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping
from typing import ClassVar, Literal, Protocol

from providers import _json
from providers._encodings import canonical_encoding_name, load_encoding
from providers._media import anthropic_image_tokens, file_tokens, openai_image_tokens
from vocabulary.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart

Confidence = Literal["exact", "estimated", "conservative"]
"""How far a count can be trusted (the planner turns it into a safety margin)."""

MessageFormat = Literal["openai", "anthropic"]
"""Whose framing overheads and media rules a counter applies."""

FALLBACK_ENCODING = "cl100k_base"
"""Encoding used when the requested one cannot be built offline."""

OPENAI_TOKENS_PER_MESSAGE = 3
OPENAI_TOKENS_PER_REQUEST = 3
OPENAI_TOKENS_PER_TOOL = 8
OPENAI_TOKENS_PER_TOOL_CALL = 3
ANTHROPIC_TOKENS_PER_MESSAGE = 4
ANTHROPIC_TOKENS_PER_REQUEST = 4
ANTHROPIC_TOKENS_PER_TOOL = 8
ANTHROPIC_TOKENS_PER_TOOL_CALL = 4
# Anthropic documents the hidden tool-use system prompt it adds whenever tools are present.
ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS = 346

_ANTHROPIC_PREFIXES = ("claude", "anthropic")
MAX_CACHED_DEFINITIONS = 4_096
"""Memoised tool and schema texts per counter (cleared when full)."""


def message_key(message: Message) -> str:
    """The key a message's count is cached under: its id, else a content hash."""
    if message.id is not None:
        return message.id
    digest = hashlib.sha256(_json.dumps(message.model_dump(mode="json")).encode()).hexdigest()
    return f"sha256:{digest[:32]}"


class TokenCounter:
    """Counts tokens for one encoding; build it with `TokenCounter.for_encoding`.

    Attributes:
        encoding_name: The requested encoding name (the storage key of counts).
        tokenizer_name: The encoding actually used (differs after a fallback).
        confidence: `estimated` with the model's own encoding, `conservative` after a fallback
            or for Anthropic-format counting.
        message_format: Whose framing overheads apply.
        tokenizations: How many texts this counter has tokenized (for cache checks).
    """

    _instances: ClassVar[dict[tuple[str, MessageFormat], TokenCounter]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, encoding_name: str, message_format: MessageFormat):
        canonical = canonical_encoding_name(encoding_name)
        self.encoding_name = encoding_name
        self.tokenizer_name = canonical or FALLBACK_ENCODING
        self.message_format: MessageFormat = message_format
        exact_tokenizer = canonical is not None and message_format == "openai"
        self.confidence: Confidence = "estimated" if exact_tokenizer else "conservative"
        self._encoding = load_encoding(self.tokenizer_name)
        # `encode_ordinary` never raises on text that looks like a special token and skips the
        # special-token scan `encode` does.
        self._encode = self._encoding.encode_ordinary
        self._per_message = (
            ANTHROPIC_TOKENS_PER_MESSAGE
            if message_format == "anthropic"
            else OPENAI_TOKENS_PER_MESSAGE
        )
        self.tokenizations = 0
        self._definitions: dict[str, int] = {}

    @classmethod
    def for_encoding(
        cls, name: str, *, message_format: MessageFormat | None = None
    ) -> TokenCounter:
        """The process-wide counter for encoding `name` (built once, then cached).

        Args:
            name: An encoding name (`o200k_base`, `cl100k_base`, ...) or a family name such as
                `claude`; unknown names fall back to `cl100k_base` with lower confidence.
            message_format: Framing rules; inferred from the name when omitted (`claude*` and
                `anthropic*` count Anthropic-style, everything else OpenAI-style).
        """
        fmt: MessageFormat = message_format or (
            "anthropic" if name.lower().startswith(_ANTHROPIC_PREFIXES) else "openai"
        )
        key = (name, fmt)
        counter = cls._instances.get(key)
        if counter is None:
            with cls._instances_lock:
                counter = cls._instances.get(key)
                if counter is None:
                    counter = cls(name, fmt)
                    cls._instances[key] = counter
        return counter

    @property
    def tokens_per_message(self) -> int:
        """Framing tokens added to every message."""
        return self._per_message

    def message_structure_tokens(self, message: Message) -> int:
        """Framing this format wraps around `message` (no tokenization needed)."""
        calls = sum(1 for p in message.parts if isinstance(p, ToolCallPart))
        per_call = (
            ANTHROPIC_TOKENS_PER_TOOL_CALL
            if self.message_format == "anthropic"
            else OPENAI_TOKENS_PER_TOOL_CALL
        )
        return self._per_message + calls * per_call

    @property
    def tokens_per_request(self) -> int:
        """Framing tokens added once per request (reply priming)."""
        if self.message_format == "anthropic":
            return ANTHROPIC_TOKENS_PER_REQUEST
        return OPENAI_TOKENS_PER_REQUEST

    def count_text(self, text: str) -> int:
        """Tokens of `text`, special-token markers counted as ordinary text."""
        if not text:
            return 0
        self.tokenizations += 1
        return len(self._encode(text))

    def count_definition(self, text: str) -> int:
        """`count_text` memoised per process, for texts repeated on every call.

        Tool definitions and output schemas are resent with every request; counting them
        once keeps long tool lists from costing a tokenization per call.
        """
        cached = self._definitions.get(text)
        if cached is None:
            cached = self.count_text(text)
            if len(self._definitions) >= MAX_CACHED_DEFINITIONS:
                self._definitions.clear()
            self._definitions[text] = cached
        return cached

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special-token markers as ordinary text)."""
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        """Text of token ids (invalid UTF-8 at a cut is replaced)."""
        return self._encoding.decode(tokens, errors="replace")

    def _message_texts(self, message: Message) -> tuple[list[str], int]:
        """The texts of a message to tokenize, and its media tokens."""
        texts: list[str] = []
        fixed = 0
        anthropic = self.message_format == "anthropic"
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolCallPart):
                texts.append(part.tool_name)
                texts.append(_json.dumps(part.input))
            elif isinstance(part, ImagePart):
                fixed += anthropic_image_tokens(part) if anthropic else openai_image_tokens(part)
            elif isinstance(part, FilePart):
                fixed += file_tokens(part)
            else:
                # Reasoning text is not sent back to either API (both need provider-signed
                # blocks), so it costs nothing in a request.
                assert isinstance(part, ReasoningPart)
        return texts, fixed

    def count_message(self, message: Message) -> int:
        """Content tokens of `message`: text, tool-call names and JSON arguments, media.

        This is the number stored with a message (`HistoryItem.tokens`). Framing (role
        markers, separators, tool-call wrappers) is not included: it depends on the request
        format, and the planner and `message_structure_tokens` add it per message.
        """
        content = message.content
        if isinstance(content, str):
            # Most messages are plain strings: skip building parts.
            if not content:
                return 0
            self.tokenizations += 1
            return len(self._encode(content))
        texts, fixed = self._message_texts(message)
        encode = self._encode
        for text in texts:
            if text:
                self.tokenizations += 1
                fixed += len(encode(text))
        return fixed

    def count_messages(self, messages: Iterable[Message]) -> list[int]:
        """`count_message` for each message, in order."""
        # A plain loop: tiktoken's `encode_ordinary_batch` starts a thread pool per call,
        # which costs more than it saves on chat-sized texts.
        return [self.count_message(m) for m in messages]

    def count_new_messages(
        self, messages: Iterable[Message], known: Mapping[str, int]
    ) -> dict[str, int]:
        """Count only the messages whose key is not in `known`.

        Args:
            messages: The messages of a request or thread, in any order.
            known: Counts already stored for this encoding, keyed by `message_key`.

        Returns:
            The new counts, keyed by `message_key` (merge them into the store).
        """
        fresh: dict[str, Message] = {}
        for message in messages:
            key = message_key(message)
            if key not in known and key not in fresh:
                fresh[key] = message
        return dict(zip(fresh, self.count_messages(fresh.values()), strict=True))


def count_new_messages(
    messages: Iterable[Message], known: Mapping[str, int], *, encoding: str
) -> dict[str, int]:
    """Module-level form of `TokenCounter.count_new_messages` for encoding `encoding`."""
    return TokenCounter.for_encoding(encoding).count_new_messages(messages, known)


class ProfileLike(Protocol):
    """What counting needs from a catalog profile (`planner.ModelProfile` fits)."""

    @property
    def provider(self) -> str:
        """Provider family, e.g. `openai` or `anthropic`."""
        ...

    @property
    def encoding(self) -> str:
        """Encoding name counts are stored under."""
        ...


def encoding_for(profile: ProfileLike) -> str:
    """The encoding name to count `profile`'s messages with (the key counts are stored under)."""
    return profile.encoding


def message_format_for(profile: ProfileLike) -> MessageFormat:
    """Whose framing rules apply to `profile`'s requests."""
    return "anthropic" if profile.provider == "anthropic" else "openai"


def counter_for(profile: ProfileLike) -> TokenCounter:
    """The process-wide counter for `profile` (encoding and framing from the profile)."""
    return TokenCounter.for_encoding(
        encoding_for(profile), message_format=message_format_for(profile)
    )
