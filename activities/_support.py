"""Support calls of a summary preparation: their sizing, their prompts, one provider call each.

A support call is planned like any provider call (never sent over the summary model's
input ceiling) and recorded as a content-free receipt linked to the generation; it never
enters the Thread.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from activities._outage import Unstaged, keeping_side_effect
from activities._providers import ProviderRegistry
from contracts.activities import PrepareSummaryInput
from planner import ModelProfile, SupportRequestRecord, derive_budget
from planner.measure import message_format
from planner.summaries import SUMMARY_REDUCE_BATCH
from providers import ChatRequest, TokenCounter
from storage import GenerationStore
from vocabulary.errors import ProviderResponseError, RequestCompositionError
from vocabulary.messages import Message

SUMMARY_HEADER = "Summary of the earlier conversation:"
"""Opens the assistant-role message that stands in for the summarised turns."""

SUMMARY_OUTPUT_TOKENS = 1_024
"""Output cap of one support call (lowered to what the request needing it can hold)."""

MIN_SUMMARY_OUTPUT_TOKENS = 16
"""A support call is never asked for fewer output tokens than this."""


_ROLLING_FRAME = "Summary so far:\n{previous}\n\nNewer messages:\n{newer}"

_INSTRUCTIONS = (
    "You write faithful, compact summaries of conversations for later turns of the same "
    "conversation. Keep decisions, facts, names, numbers, open questions and commitments. "
    "Do not invent anything. Write plain prose."
)


def render_summary(text: str) -> Message:
    """The assistant-role message a summary is sent as (derived evidence, not a rule)."""
    return Message(role="assistant", content=f"{SUMMARY_HEADER}\n{text}")


def _transcript(messages: Sequence[Message]) -> str:
    lines: list[str] = []
    for message in messages:
        text = message.text
        if message.tool_calls:
            calls = ", ".join(call.tool_name for call in message.tool_calls)
            text = f"{text} [called tools: {calls}]".strip()
        lines.append(f"{message.role}: {text}")
    return "\n".join(lines)


@dataclass(frozen=True)
class SupportPlan:
    """How the support calls of one preparation are sized (content-free).

    Attributes:
        input_max: Strict input ceiling of one support call (the summary model's window
            less its output cap, framing and safety margin, as for any provider call).
        output_cap: Output tokens each support call may produce.
        chunk_tokens: Content tokens of transcript one call may take.
        reduce_batch: Summaries one hierarchical reduction may merge.
    """

    input_max: int
    output_cap: int
    chunk_tokens: int
    reduce_batch: int


def plan_support_calls(
    profile: ModelProfile, counter: TokenCounter, *, max_summary_tokens: int | None
) -> SupportPlan:
    """Size the support calls of a summary for the summary model's window and output cap.

    Args:
        profile: The summary model's profile.
        counter: Its tokenizer.
        max_summary_tokens: The most the rendered summary may take in the request that
            needs it, if known.

    Raises:
        RequestCompositionError: `REQUEST_TOO_LARGE` when not even the instructions fit.
    """
    output_cap = min(SUMMARY_OUTPUT_TOKENS, profile.default_output_reserve)
    if max_summary_tokens is not None:
        header = counter.count_text(SUMMARY_HEADER) + 1
        output_cap = min(output_cap, max(MIN_SUMMARY_OUTPUT_TOKENS, max_summary_tokens - header))
    budget = derive_budget(profile, None, output_reserve=output_cap)
    fmt = message_format(profile.provider)
    overhead = (
        counter.count_text(_INSTRUCTIONS)
        + counter.count_text(_ROLLING_FRAME)
        + fmt.reply_priming
        + 2 * fmt.per_message
    )
    # The transcript is measured with the response model's counts; keep a tenth in hand
    # for the difference of encodings and the per-line role labels.
    room = budget.max - overhead - output_cap
    if room <= 0:
        raise RequestCompositionError(
            "REQUEST_TOO_LARGE",
            "the summary model's window cannot hold a summary call",
            diagnostics={"items": []},
        )
    chunk = max(1, room * 9 // 10)
    batch = max(2, min(SUMMARY_REDUCE_BATCH, (budget.max - overhead) // (output_cap + 8)))
    return SupportPlan(
        input_max=budget.max, output_cap=output_cap, chunk_tokens=chunk, reduce_batch=batch
    )


@dataclass
class SupportCalls:
    """The support calls of one preparation, as they are made.

    Attributes:
        request: The preparation.
        sizing: How each call is sized.
        counter: The summary model's tokenizer.
        profile: The summary model's profile.
        records: Calls made by this preparation.
        reused: Calls behind chunk summaries reused from an earlier refresh.
    """

    request: PrepareSummaryInput
    sizing: SupportPlan
    counter: TokenCounter
    profile: ModelProfile
    records: list[SupportRequestRecord] = field(default_factory=lambda: [])
    reused: list[SupportRequestRecord] = field(default_factory=lambda: [])
    answer_keys: list[str] = field(default_factory=lambda: [])
    """Keys of the answers this preparation holds until its artifact is stored."""

    @property
    def linked(self) -> list[SupportRequestRecord]:
        """Every support call behind the summary: reused chunk summaries' and new ones."""
        return [*self.reused, *self.records]


@dataclass(frozen=True)
class _Answer:
    """A paid support answer, with its record and content-free receipt."""

    text: str
    record: SupportRequestRecord
    receipt: dict[str, Any]


def _answer_key(model: str, output_cap: int, messages: Sequence[Message]) -> str:
    """The identity of a support call: the same model, cap and prompt ask the same thing."""
    body = json.dumps(
        [model, output_cap, [m.model_dump(mode="json") for m in messages]], sort_keys=True
    )
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


class SupportCaller:
    """Makes the support calls of a preparation and records their receipts.

    Answers are held in this process until the summary they serve is stored: a storage
    fault after the call (its receipt, a chunk summary or the artifact cannot be written)
    fails the preparation, and its next attempt on this worker reuses what was paid for
    instead of asking the summary model again.

    Args:
        providers: Model id to provider client.
        generations: Where support receipts are recorded.
    """

    def __init__(self, providers: ProviderRegistry, generations: GenerationStore) -> None:
        self._providers = providers
        self._generations = generations
        self._answers: Unstaged[str, _Answer] = Unstaged()

    def stored(self, calls: SupportCalls) -> None:
        """Forget the answers of a preparation whose artifact is stored now."""
        for key in calls.answer_keys:
            self._answers.staged(key)

    async def summarise(
        self, calls: SupportCalls, messages: Sequence[Message], previous: str | None
    ) -> str:
        """Summarise `messages`, folding them into `previous` when there is one."""
        prompt = _transcript(messages)
        if previous is not None:
            prompt = _ROLLING_FRAME.format(previous=previous, newer=prompt)
        return await self._support(calls, f"Summarise this conversation.\n\n{prompt}")

    async def reduce(self, calls: SupportCalls, parts: Sequence[str]) -> str:
        """Merge consecutive summaries into one (one call; none for a single part)."""
        if len(parts) == 1:
            return parts[0]
        joined = "\n\n".join(f"Part {n}:\n{text}" for n, text in enumerate(parts, start=1))
        return await self._support(
            calls, f"Merge these consecutive summaries into one.\n\n{joined}"
        )

    async def _support(self, calls: SupportCalls, prompt: str) -> str:
        request, sizing = calls.request, calls.sizing
        messages = [
            Message(role="system", content=_INSTRUCTIONS),
            Message(role="user", content=prompt),
        ]
        fmt = message_format(calls.profile.provider)
        measured = (
            sum(calls.counter.count_messages(messages))
            + fmt.reply_priming
            + fmt.per_message * len(messages)
        )
        if measured > sizing.input_max:
            # Planned like any provider call: never send what the summary model cannot take.
            raise RequestCompositionError(
                "REQUEST_TOO_LARGE",
                "a summary support call exceeds the summary model's input ceiling",
                diagnostics={
                    "items": [],
                    "required_tokens": measured,
                    "max_input_tokens": sizing.input_max,
                },
            )
        key = _answer_key(request.model, sizing.output_cap, messages)
        answer = self._answers.get(key)
        if answer is None:
            answer = await self._call(calls, messages, measured)
            self._answers.keep(key, answer)
        calls.answer_keys.append(key)
        calls.records.append(answer.record)
        # Idempotent (keyed by the call's id): an answer reused after a failed write is
        # recorded once. A short fault is waited out here; a longer one fails the attempt.
        await keeping_side_effect(
            lambda: self._generations.record_support_request(
                answer.record.id,
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                receipt=answer.receipt,
            )
        )
        return answer.text

    async def _call(
        self, calls: SupportCalls, messages: Sequence[Message], measured: int
    ) -> _Answer:
        """Ask the summary model once."""
        request, sizing = calls.request, calls.sizing
        provider, model_name = self._providers.resolve(request.model)
        response = await provider.complete(
            ChatRequest(
                model=model_name, messages=list(messages), max_output_tokens=sizing.output_cap
            )
        )
        text = response.message.text.strip()
        if not text:
            raise ProviderResponseError(
                request.model.split(":", 1)[0], "the summary model returned an empty summary"
            )
        record = SupportRequestRecord(
            id=f"support_{uuid.uuid4().hex}",
            model=request.model,
            input_tokens=measured,
            max_input_tokens=sizing.input_max,
            measurement=calls.counter.confidence,
        )
        receipt = {
            **record.model_dump(mode="json"),
            "kind": "history-summary",
            "max_output_tokens": sizing.output_cap,
            "provider_input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "finish_reason": response.finish_reason,
        }
        return _Answer(text=text, record=record, receipt=receipt)
