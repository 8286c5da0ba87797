"""A built-in OFFLINE provider for demos and tests: deterministic, no network.

It answers with a short line derived from the request's shape, e.g.
`[offline echo] turn 3: I received 5 messages; you said "what about Paris"`, and reports usage
computed with the real tokenizer. With a response schema it returns a minimal JSON instance of
the schema instead. It is not a model and never pretends to be one.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any, cast

from providers import _json
from providers.counting import TokenCounter
from providers.estimate import estimate_request
from providers.types import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SummaryRequest,
    TextDelta,
    ToolChoiceTool,
    ToolSpec,
    Usage,
)
from vocabulary.messages import Message, ToolCallPart

OFFLINE_MODEL = "echo"
"""The model name; in catalogs it is `offline:echo`."""

OFFLINE_ENCODING = "cl100k_base"
"""Matches the `offline:echo` catalog profile, so usage equals the planner's counts."""
QUOTED_WORDS = 8
"""How many words of the last user message the reply quotes."""


def _example(schema: Any) -> Any:
    """A minimal value that satisfies simple JSON schemas (enough for demos)."""
    if not isinstance(schema, dict):
        return None
    spec = cast(dict[str, Any], schema)
    if "const" in spec:
        return spec["const"]
    enum: Any = spec.get("enum")
    if isinstance(enum, list) and enum:
        return cast(list[Any], enum)[0]
    for key in ("anyOf", "oneOf"):
        options: Any = spec.get(key)
        if isinstance(options, list) and options:
            return _example(cast(list[Any], options)[0])
    kind: Any = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in cast(list[Any], kind) if k != "null"), "null")
    if kind == "object" or "properties" in spec:
        properties = cast(dict[str, Any], spec.get("properties") or {})
        return {name: _example(sub) for name, sub in properties.items()}
    defaults: dict[str, Any] = {
        "string": "offline",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
    }
    return defaults.get(kind) if isinstance(kind, str) else None


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


def _trailing_tool_results(messages: list[Message]) -> int:
    count = 0
    for message in reversed(messages):
        if message.role != "tool":
            break
        count += 1
    return count


def _forced_tool(request: ChatRequest) -> ToolSpec | None:
    """The tool a forced `tool_choice` asks for, unless tool results are being answered."""
    choice = request.tool_choice
    if not request.tools or choice is None or choice in ("auto", "none"):
        return None
    if _trailing_tool_results(request.messages):
        return None
    if isinstance(choice, ToolChoiceTool):
        return next((t for t in request.tools if t.name == choice.name), None)
    return request.tools[0]


class OfflineChatProvider:
    """The `offline:echo` provider: a deterministic stand-in that needs no network."""

    provider = "offline"

    def __init__(self) -> None:
        self._counter = TokenCounter.for_encoding(OFFLINE_ENCODING)

    def reply_text(self, request: ChatRequest) -> str:
        """The text `complete` answers with (when it does not call a tool)."""
        if request.response_format is not None:
            return _json.dumps(_example(request.response_format))
        users = [m for m in request.messages if m.role == "user"]
        count = len(request.messages)
        line = f"[offline echo] turn {len(users)}: I received {count} message{_plural(count)}"
        results = _trailing_tool_results(request.messages)
        if results:
            return f"{line}; {results} tool result{_plural(results)} came back"
        said = ""
        if users:
            words = users[-1].text.split()
            said = " ".join(words[:QUOTED_WORDS]) + (" ..." if len(words) > QUOTED_WORDS else "")
        return f'{line}; you said "{said}"' if said else line

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer deterministically from the request's shape.

        A forced tool choice (`required` or a named tool) gets one call with arguments made
        from the tool's schema, unless the request already ends with tool results; that lets
        demos run whole tool rounds offline.
        """
        digest = hashlib.sha256(_json.dumps_bytes(request.model_dump(mode="json"))).hexdigest()
        input_tokens = estimate_request(request, self._counter).total
        tool = _forced_tool(request)
        if tool is not None:
            arguments = _example(tool.parameters)
            call = ToolCallPart(
                tool_call_id=f"offline-call-{digest[:12]}",
                tool_name=tool.name,
                input=_json.as_object(arguments) or {},
            )
            message = Message(role="assistant", content=[call])
            output = self._counter.count_message(message)
            finish = "tool_calls"
        else:
            text = self.reply_text(request)
            output = self._counter.count_text(text)
            finish = "stop"
            if request.max_output_tokens is not None and output > request.max_output_tokens:
                tokens = self._counter.encode(text)[: request.max_output_tokens]
                text, output, finish = self._counter.decode(tokens), len(tokens), "length"
            message = Message(role="assistant", content=text)
        return ChatResponse(
            message=message,
            finish_reason=finish,
            usage=Usage(input_tokens=input_tokens, output_tokens=output),
            model=request.model or OFFLINE_MODEL,
            response_id=f"offline-{digest[:24]}",
            provider_finish_reason=finish,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """`complete`, delivered word by word."""
        response = await self.complete(request)
        words = response.message.text.split(" ")
        for index, word in enumerate(words):
            yield TextDelta(text=word if index == 0 else " " + word)
        yield StreamDone(response=response)

    async def count_tokens(self, request: ChatRequest) -> int:
        """The input tokens `complete` reports for `request` (exact for this provider)."""
        return estimate_request(request, self._counter).total

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """No native compaction offline; the portable summary path applies."""
        del request
        return None
