"""Helpers shared by the loopback wire formats."""

from __future__ import annotations

import json
from typing import Any, cast

from providers._json import as_object
from providers.counting import TokenCounter

ECHO_WORDS = 8
_ENCODING = "o200k_base"


def counter() -> TokenCounter:
    """The tokenizer the servers use to make up plausible usage numbers."""
    return TokenCounter.for_encoding(_ENCODING)


def text_of(content: Any) -> str:
    """Text of a wire `content` (a string or a list of blocks with `text`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for block in cast(list[Any], content):
            if isinstance(block, dict):
                block = cast(dict[str, Any], block)
                if isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif "content" in block:
                    texts.append(text_of(block["content"]))
        return "".join(texts)
    return ""


def echo_text(messages: list[Any]) -> str:
    """A deterministic reply naming the message count and quoting the last user words."""
    objects = [as_object(m) or {} for m in messages]
    users = [m for m in objects if m.get("role") == "user"]
    said = ""
    if users:
        words = text_of(users[-1].get("content")).split()
        said = " ".join(words[:ECHO_WORDS])
    count = len(messages)
    line = f"[loopback echo] I received {count} message{'s' if count != 1 else ''}"
    return f'{line}; you said "{said}"' if said else line


def input_tokens_of(body: Any) -> int:
    """Plausible input tokens: the JSON of the messages, tools and system, tokenized."""
    if not isinstance(body, dict):
        return 0
    body = cast(dict[str, Any], body)
    parts = [body.get(k) for k in ("system", "messages", "tools", "input") if body.get(k)]
    return counter().count_text(json.dumps(parts, separators=(",", ":"), ensure_ascii=False))


def pieces(text: str, size: int) -> list[str]:
    """`text` cut into pieces of `size` characters (at least one piece)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
