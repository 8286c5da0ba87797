"""The response cache's keys: pure hashing of exactly what a sealed request sends.

The lookup activity rebuilds a sealed plan's messages from PostgreSQL (as the provider
attempt does) and hashes them here; the workflow never sees a text, only the outcome.
Every part that can change a reply is in the key:

- the **context key** covers everything except the rendered user turn: the model, its
  settings and output cap, the system and context messages (content hashes), the tools
  offered (their schemas) and the tool choice, the output schema, and the projected
  history exactly as the plan sends it (each message's id and content hash, a summary
  included where it stands);
- the **exact key** is the context key and the user turn's content hash.

A semantic match compares embeddings of the user turn among entries with the same context
key only, so a similar question never borrows a reply given under another system text,
another history or another schema. The user turn's own id is left out (every generation
gets a fresh one); the ids of history messages are in (they name what the Thread holds).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocabulary.messages import Message, TextPart

KEY_VERSION = 1
"""Bumped when what goes into a key changes, so older entries simply stop matching."""


@dataclass(frozen=True)
class CacheKeyParts:
    """What a sealed request sends, as the invoke step assembles it.

    Attributes:
        model: The response model (`provider:model`).
        settings: The model settings sent (`ModelSettingsSpec` as JSON), if any.
        max_output_tokens: The output cap sent, if any.
        leading: System and context messages, in the order sent.
        history: The projected history, in the order sent (a summary where it stands).
        turn: The rendered user turn.
        tools: The schemas of the tools offered, in the order sent.
        tool_choice: The tool choice sent, if any.
        output_schema: The structured-output schema, if any.
    """

    model: str
    settings: Mapping[str, Any] | None
    max_output_tokens: int | None
    leading: Sequence[Message]
    history: Sequence[Message]
    turn: Message
    tools: Sequence[Mapping[str, Any]] = field(default_factory=tuple[Mapping[str, Any], ...])
    tool_choice: str | None = None
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CacheKeys:
    """The keys of one request (hex SHA-256 digests).

    Attributes:
        exact: The whole request.
        context: Everything but the rendered user turn (the semantic candidates' filter).
        turn: The rendered user turn's content.
    """

    exact: str
    context: str
    turn: str


def _canonical(value: Any) -> bytes:
    # ASCII escapes keep lone surrogates (which a transcript may hold) hashable.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def message_hash(message: Message) -> str:
    """The content hash of a message: everything but its id."""
    return _digest(message.model_dump(mode="json", exclude={"id"}))


def cache_keys(parts: CacheKeyParts) -> CacheKeys:
    """The exact, context and turn keys of a request."""
    context = _digest(
        {
            "version": KEY_VERSION,
            "model": parts.model,
            "settings": dict(parts.settings) if parts.settings is not None else None,
            "max_output_tokens": parts.max_output_tokens,
            "leading": [message_hash(m) for m in parts.leading],
            "history": [[m.id, message_hash(m)] for m in parts.history],
            "tools": [dict(t) for t in parts.tools],
            "tool_choice": parts.tool_choice,
            "output_schema": dict(parts.output_schema) if parts.output_schema else None,
        }
    )
    turn = message_hash(parts.turn)
    exact = hashlib.sha256(f"{context}:{turn}".encode()).hexdigest()
    return CacheKeys(exact=exact, context=context, turn=turn)


def semantic_text(turn: Message) -> str | None:
    """The text a semantic match compares, `None` when the turn is not plain text.

    A turn with images, files or other non-text parts is only ever matched exactly: two
    captions alike say nothing about two images.
    """
    if isinstance(turn.content, str):
        return turn.content or None
    if any(not isinstance(part, TextPart) for part in turn.content):
        return None
    return turn.text or None
