"""Inputs and results of the generation activities (small, content-free payloads)."""

from __future__ import annotations

from typing import Literal

from crux.models import GenerationResult, HistorySpec, StepRecord, Usage, WireModel
from planner import HistoryAggregate, HistoryItem, RequestInspection

HistorySource = Literal["thread", "caller-messages", "none"]


class ReadRequestInput(WireModel):
    """What the read stage needs: the generation's addressing, never its transcript."""

    generation_id: str
    thread_id: str | None = None
    owner: str = "main"
    model: str
    prompt_id: str
    input: object = None
    input_ref: str | None = None
    messages_ref: str | None = None
    history: HistorySpec = HistorySpec()
    max_input_tokens: int
    """Strict input ceiling for this model and budget; bounds the skeleton's size."""


class ReadRequestResult(WireModel):
    """A content-free request skeleton.

    Attributes:
        existing: The stored result when this generation already completed.
        history_source: Which source won by precedence.
        revision: The Thread revision read (pins the plan).
        head: The Thread head observed (the commit's parent).
        history: The newest causal groups that could still fit, oldest first.
        older_history: One aggregate for everything older than `history`.
        system_tokens: Size of the system instructions.
        current_turn_tokens: Size of the rendered user turn.
        counting_confidence: `exact`, `estimated` or `conservative`.
        encoding: The tokenizer encoding used.
        counted_messages: How many messages were tokenized by this read (new ones only).
    """

    existing: GenerationResult | None = None
    history_source: HistorySource = "none"
    revision: str | None = None
    head: str | None = None
    history: list[HistoryItem] = []
    older_history: HistoryAggregate = HistoryAggregate()
    system_tokens: int = 0
    current_turn_tokens: int = 0
    counting_confidence: Literal["exact", "estimated", "conservative"] = "estimated"
    encoding: str = ""
    counted_messages: int = 0


class InvokeModelInput(WireModel):
    """One provider attempt, addressed by ids only."""

    generation_id: str
    attempt: int
    thread_id: str | None = None
    owner: str = "main"
    revision: str | None = None
    history_source: HistorySource = "none"
    model: str
    message_ids: list[str] = []
    max_output_tokens: int | None = None


class InvokeModelResult(WireModel):
    """What the workflow learns from an attempt: sizes and decisions, never text."""

    usage: Usage
    finish_reason: str
    output_tokens: int
    tool_call_ids: list[str] = []
    reused_staged_output: bool = False


class CommitTurnInput(WireModel):
    """Publish the accepted turn and record the generation."""

    generation_id: str
    workflow_id: str
    thread_id: str | None = None
    owner: str = "main"
    expected_head: str | None = None
    accepted_attempt: int
    history_source: HistorySource = "none"
    steps: list[StepRecord] = []
    inspections: list[RequestInspection] = []
    """Content-free inspections of the steps' sealed plans, persisted beside receipts."""


class CommitTurnResult(WireModel):
    """The stored generation result."""

    result: GenerationResult


ACTIVITY_READ_REQUEST = "crux.read_request"
ACTIVITY_INVOKE_MODEL = "crux.invoke_model"
ACTIVITY_COMMIT_TURN = "crux.commit_turn"
