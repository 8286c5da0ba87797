"""Inputs and results of the generation activities (small, content-free payloads)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    JsonValue,
    PrivateAttr,
    field_serializer,
    model_validator,
)

from contracts._compact import CompactWireModel
from contracts.generation import (
    GenerationInput,
    GenerationOutcome,
    HistorySpec,
    InputBudgetSpec,
    StepFigures,
    SummaryStrategy,
    Usage,
)
from contracts.settings import ModelSettingsSpec, ToolPolicySpec
from planner import (
    HistoryAggregate,
    HistoryColumns,
    HistorySummary,
    ModelProfile,
    RequestInspection,
    RequestReceipt,
    SealedPlan,
)
from vocabulary.commits import WireModel
from vocabulary.ids import assistant_message_id
from vocabulary.staging import HistorySource, SummarySource


class SelectedSource(CompactWireModel):
    """A context source the sealed plan sends (id and placement, never text)."""

    id: str
    placement: Literal["system", "message"] = "system"


class PlanAhead(CompactWireModel):
    """Plan the generation's first provider call right after the read, and record it.

    The read is a local activity, so neither this input nor the recorded evidence enters
    history. The workflow plans the same call from the read's result with the same request
    id; when its plan's digest equals `ReadRequestResult.planned`, the receipt is already
    stored and the workflow skips its own record.

    Attributes:
        request_id: The id the workflow gives its first plan.
        generation: The generation input the plan is made for.
    """

    request_id: str
    generation: GenerationInput


class ReadRequestInput(CompactWireModel):
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
    output_schema: dict[str, Any] | None = None
    """The structured-output schema to measure with the request."""
    fingerprint: str | None = None
    """Content-free fingerprint of the request when the workflow can compute it (inline
    input); a reused generation id with another fingerprint is `identity_conflict`."""
    include_reply: bool = False
    """The outcome carries the reply text (`GenerationInput.include_reply`): refused
    without a payload codec on the worker; a replayed outcome is read with its reply."""
    keep_listing: bool = False
    """List every group that could fit the ceiling, not only those the history policy can
    use: a step hook may plan a step under another model or budget (managed history's
    default suffix is a share of the budget), and a tool round grows the turn of later
    steps."""
    plan_ahead: PlanAhead | None = None
    """Plan the first call on the result and record its receipt (see `PlanAhead`)."""


class ReadRequestResult(CompactWireModel):
    """A content-free request skeleton.

    Attributes:
        existing: The stored outcome when this generation already completed.
        history_source: Which source won by precedence.
        revision: The Thread revision read (pins the plan).
        head: The Thread head observed (the commit's parent).
        history: The newest causal groups that could still fit, oldest first, packed per
            group (token counts, sizes, tool calls; no ids: positions stand for messages).
        older_history: One aggregate for everything older than `history` (no ids).
        system_tokens: Size of the system instructions.
        current_turn_tokens: Size of the rendered user turn.
        counting_confidence: `exact`, `estimated` or `conservative`.
        encoding: The tokenizer encoding used.
        counted_messages: How many messages were tokenized by this read (new ones only).
    """

    existing: GenerationOutcome | None = None
    history_source: HistorySource = "none"
    revision: str | None = None
    head: str | None = None
    history: HistoryColumns = HistoryColumns()
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
    output_schema_tokens: int = 0
    """Tokens of the structured-output schema."""
    """Tokens of the offered tools' schemas."""
    tool_policies: dict[str, ToolPolicySpec] = {}
    """Retry and timeout policies declared with the offered tools on this worker (the
    generation input's own policies take precedence)."""
    approval_tools: list[str] = []
    """Offered tools declared on this worker as requiring approval: their calls wait for a
    decision even when the generation input does not name them in `approval_tools`."""
    profile: ModelProfile | None = None
    """The worker catalog's profile of the model: the workflow plans with it (custom
    profiles included), never with a module-global default."""
    planned: str | None = None
    """With `ReadRequestInput.plan_ahead`: the digest (`plan_digest`) of the first plan the
    read sealed and recorded; `None` when it recorded none."""
    through_ids: dict[int, str] = {}
    """With `ReadRequestInput.plan_ahead`, on a Thread: the ids at the positions where the
    summaries the first plan asks for end (inline, or maintenance after the response), so
    the workflow names their prefixes without a local activity. Keyed by position on the
    path read."""
    _recorded: RecordPlanInput | None = PrivateAttr(default=None)
    """What the read recorded, for the worker's telemetry only (never serialised)."""
    _path_ids: tuple[str, ...] = PrivateAttr(default=())
    """The ids of the Thread's path read, by position (in the read's process only)."""

    def with_path(self, ids: tuple[str, ...]) -> ReadRequestResult:
        """This result, knowing the ids of the path it read (never sent over the wire)."""
        result = self.model_copy()
        result._path_ids = ids
        return result

    def with_through_ids(self, positions: tuple[int, ...]) -> ReadRequestResult:
        """This result naming the path's ids at `positions` (those on the path read)."""
        ids = self._path_ids
        named = {position: ids[position] for position in positions if 0 <= position < len(ids)}
        if not named:
            return self
        result = self.model_copy(update={"through_ids": named})
        result._path_ids = ids
        return result

    def with_recorded(self, recorded: RecordPlanInput, digest: str) -> ReadRequestResult:
        """This result, saying the read recorded `recorded` (whose plan has `digest`)."""
        result = self.model_copy(update={"planned": digest})
        result._recorded = recorded
        return result

    @property
    def recorded(self) -> RecordPlanInput | None:
        """The plan evidence this read recorded in this process (never sent over the wire)."""
        return self._recorded

    @field_serializer("history", "older_history", "summary", when_used="json")
    def _history_stated(self, value: BaseModel | None) -> dict[str, Any] | None:
        # Nested history shapes leave out their defaults too (a column with no tool calls,
        # an aggregate without ids, a summary that is not stale): validation fills them in.
        return None if value is None else value.model_dump(mode="json", exclude_defaults=True)


class InvokeModelInput(CompactWireModel):
    """One provider attempt, addressed by ids and positions only."""

    generation_id: str
    attempt: int
    thread_id: str | None = None
    owner: str = "main"
    revision: str | None = None
    history_source: HistorySource = "none"
    model: str
    message_ranges: list[tuple[int, int]] = []
    """History to send: the sealed plan's position ranges of the history source (the
    Thread's path at `revision`, or the call-site messages), mapped to ids by the
    activity."""
    context: list[SelectedSource] = []
    summary_artifact_id: str | None = None
    """Managed history: the summary sent in place of the older turns."""
    summary_position: int = 0
    """Where the summary goes among the history messages (after the system prefix)."""
    max_output_tokens: int | None = None
    tools: list[str] = []
    tool_choice: Literal["auto", "required", "none"] | None = None
    turn_messages: int = 0
    """Tool-round messages of this turn staged so far (sent after the user message)."""
    stream: bool = False
    """Write provider deltas to PostgreSQL as they arrive."""
    output_schema: dict[str, Any] | None = None
    """The structured-output schema: sent natively, and the reply validated against it
    before anything of it is staged."""
    output_prompt_id: str | None = None
    """With `output_schema`: the prompt whose pydantic output model, when registered on the
    worker with this very schema, validates the reply too."""
    settings: ModelSettingsSpec | None = None
    """Model settings sent with the call (the adapter applies its provider's extras)."""
    request_id: str | None = None
    """The sealed plan's request id: a retried try stores its retry count on that receipt."""
    commit: CommitTurnInput | None = None
    """Publish the turn as soon as this attempt answers it, in the same activity.

    Set when nothing but the answer itself decides whether it is accepted (no acceptance
    gate, step hook or time budget): the commit as the workflow would run it after the
    attempt, less the attempt's own step (`CommitTurnInput.answered_by`). A reply that does
    not end the turn (tool calls, defects, a moved Thread) is staged only; a commit that
    fails leaves the answer staged for the workflow's own commit, which waits out storage
    visibly. `None`: the workflow commits."""

    def answered_commit(self, invoked: InvokeModelResult) -> CommitTurnInput | None:
        """The commit this attempt runs after `invoked` ended the turn (`None` without one)."""
        if self.commit is None:
            return None
        return self.commit.answered_by(
            StepFigures(
                attempt=self.attempt,
                request_id=self.request_id or "",
                usage=invoked.usage,
                finish_reason=invoked.finish_reason,
                output_tokens=invoked.output_tokens,
            )
        )


class InvokeModelResult(CompactWireModel):
    """What the workflow learns from an attempt: sizes and decisions, never text."""

    usage: Usage
    finish_reason: str
    output_tokens: int
    tool_call_ids: list[str] = []
    reused_staged_output: bool = False
    turn_tokens: int = 0
    """Content tokens of the tool-call message staged for the next round (0 without calls)."""
    defects: list[str] = []
    """The reply failed output validation here (paths and kinds only): nothing of it was
    staged, and the workflow decides whether to retry."""
    revision_moved: bool = False
    """The Thread moved after the read and nothing was staged for the attempt: no provider
    call was made, and the workflow reads the new revision (or fails, if asked to)."""
    tool_names: list[str] = []
    """Tool name of each call in `tool_call_ids`, when it names a tool offered to the
    model; `""` for a name the model invented (it could carry anything it was shown)."""
    retried: int = 0
    """Failed tries of this call that Temporal retried before this one answered (provider
    errors, timeouts, a lost worker); the Temporal UI counts them with the attempts."""
    committed: CommitTurnResult | None = None
    """The turn this attempt answered was published by the attempt itself
    (`InvokeModelInput.commit`); `None` when the workflow still commits it."""

    @classmethod
    def published(cls, outcome: GenerationOutcome) -> InvokeModelResult:
        """An attempt standing for the commit an earlier execution of it made (`outcome`)."""
        return cls(
            usage=outcome.usage,
            finish_reason="committed",
            output_tokens=0,
            committed=CommitTurnResult.whole(outcome),
        )

    @property
    def ends_the_turn(self) -> bool:
        """A staged answer with no tool call and no defect: nothing but a commit remains."""
        return not (self.revision_moved or self.defects or self.tool_call_ids)

    @classmethod
    def moved(cls) -> InvokeModelResult:
        """The result of an attempt refused because the Thread moved before dispatch."""
        return cls(
            usage=Usage(), finish_reason="revision-moved", output_tokens=0, revision_moved=True
        )


class RunToolInput(CompactWireModel):
    """Run one tool call of a staged assistant message."""

    generation_id: str
    thread_id: str | None = None
    model: str
    call_turn_index: int
    """Index of the staged assistant tool-call message within the turn."""
    call_index: int
    result_turn_index: int
    """Index the tool result takes within the turn."""
    policy: ToolPolicySpec | None = None
    """The tool's retry and timeout policy; `None` runs the handler once, unbounded."""
    denied: str | None = None
    """The reason code of an operator's denial: the handler is not run and a fixed,
    content-free denial result is staged in its place."""


class RunToolResult(CompactWireModel):
    """Size and outcome of a tool call (never its content)."""

    tokens: int
    failed: bool = False


class PrepareSummaryInput(CompactWireModel):
    """Prepare (or find) the summary of a history prefix: a Thread's, or a transcript's.

    Attributes:
        thread_id: The Thread (for a transcript, the Thread the generation names, if any).
        owner: Whose selected path the prefix lies on (for a transcript, whose scope).
        through_id: Last message the summary covers (for a transcript, its content-derived
            id: `storage.summaries.transcript_ids`).
        strategy: `adaptive`, `regenerate`, `rolling` or `hierarchical`.
        model: Support model (`provider:model`).
        counting_model: The response model, whose tokenizer sizes the summary.
        generation_id: The generation that asked (receipts link to it).
        max_summary_tokens: The most the rendered summary may take in the request that
            needs it (lowers the support calls' output cap).
        chunk_tokens: Content tokens one chunk may hold (`None`: one support call's).
        chunk_units: Units one chunk may hold (`None`: the strategy's default).
        source: `thread` (the owner's selected path) or `transcript` (call-site or
            prompt-level messages, read from the copy staged for the preparation).
    """

    thread_id: str | None = None
    owner: str = "main"
    through_id: str
    strategy: SummaryStrategy = "adaptive"
    model: str
    counting_model: str
    generation_id: str | None = None
    max_summary_tokens: int | None = None
    chunk_tokens: int | None = Field(default=None, ge=1)
    chunk_units: int | None = Field(default=None, ge=1)
    source: SummarySource = "thread"

    @model_validator(mode="after")
    def _thread_named(self) -> PrepareSummaryInput:
        if self.source == "thread" and self.thread_id is None:
            raise ValueError("a Thread summary names its thread_id")
        return self


class AwaitSummaryInput(WireModel):
    """Wait for a summary preparation and return its artifact.

    Attributes:
        workflow_id: The `SummaryWorkflow`.
        request: What it prepares (to find the artifact once it is done).
        start: Start the preparation under `workflow_id` unless an identical one is
            already running (then join that one); `False` joins a running one only.
    """

    workflow_id: str
    request: PrepareSummaryInput
    start: bool = False


class PrepareSummaryResult(WireModel):
    """The prepared artifact, content-free.

    Attributes:
        summary: The artifact: its id, size and the messages it covers (its text stays in
            PostgreSQL).
        support_calls: Provider calls the preparation made.
        reused: `True` when a ready artifact was found and nothing was prepared.
    """

    summary: HistorySummary
    support_calls: int = 0
    reused: bool = False


class CountRequestInput(CompactWireModel):
    """Ask the provider for an exact count of the request, as it would be sent."""

    generation_id: str
    thread_id: str | None = None
    history_source: HistorySource = "none"
    model: str
    message_ranges: list[tuple[int, int]] = []
    """History to count, as position ranges of the history source (see `InvokeModelInput`)."""
    owner: str = "main"
    context: list[SelectedSource] = []


class CountRequestResult(CompactWireModel):
    """The provider's count, or `None` when it offers no counting endpoint."""

    input_tokens: int | None = None


class RecordPlanInput(CompactWireModel):
    """The content-free evidence of one sealed plan, stored before its attempt is sent.

    Recorded by a local activity, whose input never enters Temporal history: afterwards
    every payload names the plan by `receipt.id`.

    Attributes:
        generation_id: The generation.
        thread_id: Its Thread (`None` ad hoc), so deleting the Thread removes the receipt.
        receipt: The sealed plan's receipt.
        inspection: The sealed plan's inspection.
        replace: Overwrite a record under the same request id (see the field).
    """

    generation_id: str
    thread_id: str | None = None
    receipt: RequestReceipt
    inspection: RequestInspection
    replace: bool = False
    """Overwrite a record under the same request id: the read recorded a plan ahead that
    differs from the workflow's (no attempt was sent with it)."""

    @classmethod
    def of(
        cls, request: GenerationInput, sealed: SealedPlan, *, replace: bool = False
    ) -> RecordPlanInput:
        """The record of `sealed`, a plan of the generation `request`."""
        return cls(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            receipt=sealed.receipt,
            inspection=sealed.inspection,
            replace=replace,
        )


class CommitTurnInput(CompactWireModel):
    """Publish the accepted turn and record the generation.

    Steps name their receipts by id (recorded before each attempt was sent).
    """

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
    steps: list[StepFigures] = []
    include_reply: bool = False
    """Return the reply text in the outcome (`GenerationInput.include_reply`)."""

    def answered_by(self, step: StepFigures) -> CommitTurnInput:
        """This commit completed by the attempt that answers the turn (its last step).

        The workflow's commit after `step` is exactly this: the steps so far and then
        `step`, the answer's content tokens after the turn's other messages.
        """
        return self.model_copy(
            update={
                "accepted_attempt": step.attempt,
                "steps": [*self.steps, step],
                "message_tokens": [*self.message_tokens, step.output_tokens],
            }
        )


class CommitTurnResult(CompactWireModel):
    """The stored generation's outcome, less what the commit's input already says.

    The outcome enters Temporal history as the workflow's result; the commit's own result
    carries only the fields the workflow cannot know (the Thread's commit receipt, a
    replayed generation's recorded figures, the reply), so a turn's history holds the
    outcome once. The complete result (every step's receipt) stays in PostgreSQL.

    Attributes:
        delta: The outcome's fields (JSON) that differ from `implied_outcome(input)`.
        result: The whole outcome, as commits recorded by the first worker deployment of
            this release line return it; replaying their histories reads it.
    """

    delta: dict[str, JsonValue] = {}
    result: GenerationOutcome | None = None

    @classmethod
    def of(cls, outcome: GenerationOutcome, request: CommitTurnInput) -> CommitTurnResult:
        """The result standing for `outcome`, given the commit's input."""
        implied = implied_outcome(request)
        return cls(
            delta={
                name: value
                for name, value in outcome.model_dump(mode="json").items()
                if name not in implied or implied[name] != value
            }
        )

    @classmethod
    def whole(cls, outcome: GenerationOutcome) -> CommitTurnResult:
        """The result standing for `outcome` whatever the commit's input implies."""
        return cls(delta=outcome.model_dump(mode="json"))

    def outcome(self, request: CommitTurnInput) -> GenerationOutcome:
        """The whole outcome, given the commit's input."""
        if self.result is not None:
            return self.result
        return GenerationOutcome.model_validate({**implied_outcome(request), **self.delta})


def implied_outcome(request: CommitTurnInput) -> dict[str, JsonValue]:
    """The outcome's fields (JSON) as a first commit of `request` records them."""
    return {
        "generation_id": request.generation_id,
        "thread_id": request.thread_id,
        "output_message_id": assistant_message_id(request.generation_id),
        "request_ids": [step.request_id for step in request.steps],
        "usage": Usage(
            input_tokens=sum(step.usage.input_tokens for step in request.steps),
            output_tokens=sum(step.usage.output_tokens for step in request.steps),
        ).model_dump(mode="json"),
        "history_source": request.history_source,
        "replayed": False,
    }


class ResolveHistoryIdsInput(WireModel):
    """Name the messages at some positions of a Thread's selected path.

    Attributes:
        thread_id: The Thread.
        owner: Whose selected path the positions lie on (a turn committed after the
            head the read observed extends that path, so earlier positions keep naming the
            same messages).
        positions: Positions on that path (e.g. `Preparation.through_position`).
    """

    thread_id: str
    owner: str = "main"
    positions: list[int]


class ResolveHistoryIdsResult(WireModel):
    """The ids at the asked positions, `None` where a position is off the path."""

    ids: list[str | None]


class StageSummarySourceInput(WireModel):
    """Name the end of a transcript prefix to summarise, and stage it for the preparation.

    The transcript is the generation's staged call-site (or prompt-level) messages, which
    its commit removes; the preparation (inline, or after the response) reads its own copy.

    Attributes:
        generation_id: The generation whose transcript is summarised.
        thread_id: The Thread it names, if any (the scope; deleting it deletes the copy).
        owner: Its owner (the scope).
        through_position: The prefix's last message, by position in the transcript.
        strategy: The preparation's strategy (with `model`, names the copy).
        model: The summary model.
    """

    generation_id: str
    thread_id: str | None = None
    owner: str = "main"
    through_position: int = Field(ge=0)
    strategy: SummaryStrategy = "adaptive"
    model: str


class StageSummarySourceResult(WireModel):
    """The prefix's last message by its content-derived id; `None` when off the transcript."""

    through_id: str | None = None


# Activity names are persisted in histories: they stay as they are, and payloads only gain
# optional fields (see the versioning policy in the docs). `contracts.stubs` types each one.
ACTIVITY_READ_REQUEST = "crux.read_request"
ACTIVITY_INVOKE_MODEL = "crux.invoke_model"
ACTIVITY_COMMIT_TURN = "crux.commit_turn"
ACTIVITY_COUNT_REQUEST = "crux.count_request"
ACTIVITY_RECORD_PLAN = "crux.record_plan"
ACTIVITY_RESOLVE_HISTORY_IDS = "crux.resolve_history_ids"
ACTIVITY_RUN_TOOL = "crux.run_tool"
SUMMARY_WORKFLOW = "SummaryWorkflow"
"""The summary preparation's workflow type (started by name: its run takes a raw payload)."""
ACTIVITY_PREPARE_SUMMARY = "crux.prepare_summary"
ACTIVITY_AWAIT_SUMMARY = "crux.await_summary"
ACTIVITY_STAGE_SUMMARY_SOURCE = "crux.stage_summary_source"

SUMMARY_RUN_LOST = "SummaryRunLost"
"""`ApplicationError.type` of a joined summary preparation that timed out: its tries were
lost with their workers, not refused. Internal: the joining generation prepares the summary
again (`workflows._summaries.LOST_PREPARATION_ROUNDS`); it never reaches a caller."""


class DiscardGenerationInput(CompactWireModel):
    """Remove what a failed or cancelled generation staged.

    Attributes:
        generation_id: The generation.
        thread_id: Its Thread (`None` ad hoc).
        refused: The run was refused as invalid (`ConfigurationError`) and produced
            nothing, so its identity claim goes too: the corrected request may reuse the
            generation id.
    """

    generation_id: str
    thread_id: str | None = None
    refused: bool = False


class DiscardGenerationResult(CompactWireModel):
    """How many staged rows were removed."""

    deleted: int


ACTIVITY_DISCARD_GENERATION = "crux.discard_generation"
