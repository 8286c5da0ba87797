"""An in-process scripted provider for tests that do not need HTTP.

`ScriptedChatProvider` answers from a queue of scripted outcomes (a reply text, a full
`ChatResponse`, or an exception to raise) and records every request it received. With an
empty queue it falls back to `OfflineChatProvider`, so a test only scripts what it checks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Iterable

from providers.counting import TokenCounter
from providers.offline import OFFLINE_ENCODING, OfflineChatProvider
from providers.types import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SummaryRequest,
    TextDelta,
    Usage,
)
from vocabulary.messages import Message

Outcome = str | ChatResponse | BaseException
"""A scripted outcome: reply text, a complete response, or an exception to raise."""


class ScriptedChatProvider:
    """`ChatProvider` that replays scripted outcomes in order.

    Args:
        outcomes: Initial outcomes; more can be added with `enqueue`.

    Attributes:
        requests: Every request received, in order.
        summaries: Every summary request received, in order.
    """

    provider = "scripted"

    def __init__(self, outcomes: Iterable[Outcome] = ()):
        self._queue: deque[Outcome] = deque(outcomes)
        self._fallback = OfflineChatProvider()
        self._counter = TokenCounter.for_encoding(OFFLINE_ENCODING)
        self.requests: list[ChatRequest] = []
        self.summaries: list[SummaryRequest] = []

    def enqueue(self, *outcomes: Outcome) -> None:
        """Script the next outcomes."""
        self._queue.extend(outcomes)

    @property
    def pending(self) -> int:
        """Outcomes not consumed yet."""
        return len(self._queue)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Return (or raise) the next scripted outcome, else the offline echo."""
        self.requests.append(request)
        if not self._queue:
            return await self._fallback.complete(request)
        outcome = self._queue.popleft()
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, ChatResponse):
            return outcome
        return ChatResponse(
            message=Message(role="assistant", content=outcome),
            finish_reason="stop",
            usage=Usage(
                input_tokens=await self._fallback.count_tokens(request),
                output_tokens=self._counter.count_text(outcome),
            ),
            model=request.model,
            response_id=f"scripted-{len(self.requests)}",
            provider_finish_reason="stop",
        )

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        """`complete`, with the reply text delivered as one delta."""
        response = await self.complete(request)
        if response.message.text:
            yield TextDelta(text=response.message.text)
        yield StreamDone(response=response)

    async def count_tokens(self, request: ChatRequest) -> int:
        """The offline provider's exact count."""
        return await self._fallback.count_tokens(request)

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """Records the request; offers no native summary."""
        self.summaries.append(request)
        return None
