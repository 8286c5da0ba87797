"""Inputs and results of the generation activities (small, content-free payloads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from contracts.generation import (
    GenerationResult,
    HistorySpec,
    InputBudgetSpec,
    StepRecord,
    SummaryStrategy,
    Usage,
)
from planner import (
    HistoryAggregate,
    HistoryItem,
    HistorySummary,
    ModelProfile,
    RequestInspection,
    RequestReceipt,
)
from vocabulary.commits import WireModel
from vocabulary.messages import Role
from vocabulary.staging import HistorySource

_ROLE_LETTERS: dict[Role, str] = {"system": "s", "user": "u", "assistant": "a", "tool": "t"}
_LETTER_ROLES: dict[str, Role] = {letter: role for role, letter in _ROLE_LETTERS.items()}


class CompactHistory(WireModel):
    """History items in columns: a third of the bytes of one object per message.

    The skeleton crosses Temporal history once per generation, so its per-message cost
    matters for long Threads.

    Attributes:
        ids: Message ids, oldest first.
        roles: One letter per message (`s`, `u`, `a`, `t`).
        tokens: Content tokens per message.
        group_sizes: Lengths of the consecutive causal groups.
        tool_calls: Message index -> ids of the tool calls it makes (sparse).
        tool_results: Message index -> the call id it answers (sparse).
    """

    ids: list[str] = []
    roles: str = ""
    tokens: list[int] = []
    group_sizes: list[int] = []
    tool_calls: dict[int, list[str]] = {}
    tool_results: dict[int, str] = {}

    @classmethod
    def from_items(cls, items: Sequence[HistoryItem]) -> CompactHistory:
        """Pack planner history items."""
        sizes: list[int] = []
        for index, item in enumerate(items):
            if index > 0 and item.group_id == items[index - 1].group_id:
                sizes[-1] += 1
            else:
                sizes.append(1)
        return cls(
            ids=[item.id for item in items],
            roles="".join(_ROLE_LETTERS[item.role] for item in items),
            tokens=[item.tokens for item in items],
            group_sizes=sizes,
            tool_calls={
                i: list(item.tool_call_ids) for i, item in enumerate(items) if item.tool_call_ids
            },
            tool_results={
                i: item.tool_call_id for i, item in enumerate(items) if item.tool_call_id
            },
        )

    def items(self) -> tuple[HistoryItem, ...]:
        """Unpack into planner history items (a group is named by its first message)."""
        unpacked: list[HistoryItem] = []
        index = 0
        for size in self.group_sizes:
            group_id = self.ids[index]
            for position in range(index, index + size):
                unpacked.append(
                    HistoryItem(
                        id=self.ids[position],
                        role=_LETTER_ROLES[self.roles[position]],
                        group_id=group_id,
                        tokens=self.tokens[position],
                        tool_call_ids=tuple(self.tool_calls.get(position, ())),
                        tool_call_id=self.tool_results.get(position),
                    )
                )
            index += size
        return tuple(unpacked)


class SelectedSource(WireModel):
    """A context source the sealed plan sends (id and placement, never text)."""

    id: str
    placement: Literal["system", "message"] = "system"


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
    context_source_ids: list[str] = []
    """Staged context sources to size with the model's tokenizer."""
    tools: list[str] = []
    """Tools offered to the model (their schemas count toward the request)."""
    max_input_tokens: int
    """Strict input ceiling for this model and budget; bounds the skeleton's size."""
    input_budget: InputBudgetSpec | None = None
    """The generation's budget; with `derive_ceiling`, the reader derives the ceiling."""
    max_output_tokens: int | None = None
    """The generation's output cap (the reserve the ceiling leaves)."""
    derive_ceiling: bool = False
    """Derive the ceiling from the worker's own catalog instead of `max_input_tokens`."""
    fingerprint: str | None = None
    """Content-free fingerprint of the request when the workflow can compute it (inline
    input); a reused generation id with another fingerprint is `identity_conflict`."""


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
    history: CompactHistory = CompactHistory()
    older_history: HistoryAggregate = HistoryAggregate()
    system_tokens: int = 0
    current_turn_tokens: int = 0
    summary: HistorySummary | None = None
    """The best stored summary of a prefix of the path (managed history only)."""
    counting_confidence: Literal["exact", "estimated", "conservative"] = "estimated"
    encoding: str = ""
    counted_messages: int = 0
    context_tokens: dict[str, int] = {}
    """Content tokens of each staged context source."""
    tool_schema_tokens: int = 0
    """Tokens of the offered tools' schemas."""
    profile: ModelProfile | None = None
    """The worker catalog's profile of the model: the workflow plans with it (custom
    profiles included), never with a module-global default."""


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
    context: list[SelectedSource] = []
    summary_artifact_id: str | None = None
    """Managed history: the summary sent in place of the older turns."""
    summary_position: int = 0
    """Where the summary goes among the history messages (after the system prefix)."""
    older_through_id: str | None = None
    """Exact history whose older aggregate fits: send the path through this id as well."""
    max_output_tokens: int | None = None
    tools: list[str] = []
    tool_choice: Literal["auto", "required", "none"] | None = None
    turn_messages: int = 0
    """Tool-round messages of this turn staged so far (sent after the user message)."""
    stream: bool = False
    """Write provider deltas to PostgreSQL as they arrive."""


class InvokeModelResult(WireModel):
    """What the workflow learns from an attempt: sizes and decisions, never text."""

    usage: Usage
    finish_reason: str
    output_tokens: int
    tool_call_ids: list[str] = []
    reused_staged_output: bool = False
    turn_tokens: int = 0
    """Content tokens of the tool-call message staged for the next round (0 without calls)."""
    revision_moved: bool = False
    """The Thread moved after the read and nothing was staged for the attempt: no provider
    call was made, and the workflow reads the new revision (or fails, if asked to)."""

    @classmethod
    def moved(cls) -> InvokeModelResult:
        """The result of an attempt refused because the Thread moved before dispatch."""
        return cls(
            usage=Usage(), finish_reason="revision-moved", output_tokens=0, revision_moved=True
        )


class RunToolInput(WireModel):
    """Run one tool call of a staged assistant message."""

    generation_id: str
    thread_id: str | None = None
    model: str
    call_turn_index: int
    """Index of the staged assistant tool-call message within the turn."""
    call_index: int
    result_turn_index: int
    """Index the tool result takes within the turn."""


class RunToolResult(WireModel):
    """Size and outcome of a tool call (never its content)."""

    tokens: int
    failed: bool = False


class PrepareSummaryInput(WireModel):
    """Prepare (or find) the summary of a Thread prefix.

    Attributes:
        thread_id: The Thread.
        owner: Whose selected path the prefix lies on.
        through_id: Last message the summary covers.
        strategy: `adaptive`, `regenerate`, `rolling` or `hierarchical`.
        model: Support model (`provider:model`).
        counting_model: The response model, whose tokenizer sizes the summary.
        generation_id: The generation that asked (receipts link to it).
        max_summary_tokens: The most the rendered summary may take in the request that
            needs it (lowers the support calls' output cap).
    """

    thread_id: str
    owner: str = "main"
    through_id: str
    strategy: SummaryStrategy = "adaptive"
    model: str
    counting_model: str
    generation_id: str | None = None
    max_summary_tokens: int | None = None


class AwaitSummaryInput(WireModel):
    """Wait for a running summary preparation and return its artifact.

    Attributes:
        workflow_id: The running `SummaryWorkflow`.
        request: What it prepares (to find the artifact once it is done).
    """

    workflow_id: str
    request: PrepareSummaryInput


class PrepareSummaryResult(WireModel):
    """The prepared artifact, content-free."""

    summary: HistorySummary
    support_calls: int = 0
    reused: bool = False


class CountRequestInput(WireModel):
    """Ask the provider for an exact count of the request, as it would be sent."""

    generation_id: str
    thread_id: str | None = None
    history_source: HistorySource = "none"
    model: str
    message_ids: list[str] = []
    context: list[SelectedSource] = []


class CountRequestResult(WireModel):
    """The provider's count, or `None` when it offers no counting endpoint."""

    input_tokens: int | None = None


class CommitTurnInput(WireModel):
    """Publish the accepted turn and record the generation."""

    generation_id: str
    workflow_id: str
    thread_id: str | None = None
    owner: str = "main"
    expected_head: str | None = None
    accepted_attempt: int
    history_source: HistorySource = "none"
    turn_messages: int = 0
    """Tool-round messages between the user message and the final answer."""
    message_tokens: list[int] = []
    """Content tokens of the committed messages, in order, under `encoding`: stored with
    them so the next read does not load their text only to count it."""
    encoding: str = ""
    steps: list[StepRecord] = []
    inspections: list[RequestInspection] = []
    """Content-free inspections of the steps' sealed plans, persisted beside receipts."""
    superseded: list[RequestReceipt] = []
    """Receipts of plans never sent because the Thread moved first (persisted, so the
    `previous_request_id` links of the sent plans resolve)."""


class CommitTurnResult(WireModel):
    """The stored generation result."""

    result: GenerationResult


ACTIVITY_READ_REQUEST = "crux.read_request"
ACTIVITY_INVOKE_MODEL = "crux.invoke_model"
ACTIVITY_COMMIT_TURN = "crux.commit_turn"
ACTIVITY_COUNT_REQUEST = "crux.count_request"
ACTIVITY_RUN_TOOL = "crux.run_tool"
ACTIVITY_PREPARE_SUMMARY = "crux.prepare_summary"
ACTIVITY_AWAIT_SUMMARY = "crux.await_summary"


class DiscardGenerationInput(WireModel):
    """Remove what a failed or cancelled generation staged.

    Attributes:
        generation_id: The generation.
        thread_id: Its Thread (`None` ad hoc).
    """

    generation_id: str
    thread_id: str | None = None


class DiscardGenerationResult(WireModel):
    """How many staged rows were removed."""

    deleted: int


ACTIVITY_DISCARD_GENERATION = "crux.discard_generation"
