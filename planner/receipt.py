"""Content-free evidence of a planned request: receipts and inspections.

`RequestReceipt` is the small per-call record (`result.steps[i].request`); it round-trips
through JSON. `RequestInspection` is the full content-free inspection: contributions,
candidates with rejection reasons, size breakdown, counting, artifacts and linked requests.
Neither ever holds prompt, message, tool or schema content: only ids, sizes and decisions.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner._base import Confidence, FrozenModel
from planner.ladder import RungKind
from vocabulary.gate import ConstraintReport, GateReport

AdaptedKind = Literal["authored", "summary", "offload", "omitted"]
SummaryPath = Literal["portable", "provider-native"]
"""How a history summary was prepared."""


class Adaptation(FrozenModel):
    """A deviation from the full exact representation of one contributor.

    Attributes:
        contributor: Contributor id (`history` for managed history).
        representation: `authored`, `summary`, `offload` or `omitted`.
        source: Id of the alternative, artifact or handle that was selected, if any.
        full_tokens: Size of the unadapted request (every contributor at `full`).
        selected_tokens: Size of the request as sealed.
        contributor_full_tokens: This contributor's size at `full`.
        contributor_selected_tokens: Its size as selected.
    """

    contributor: str
    representation: AdaptedKind
    source: str | None = None
    full_tokens: int
    selected_tokens: int
    contributor_full_tokens: int
    contributor_selected_tokens: int


class ReceiptWarning(FrozenModel):
    """A content-free warning attached to a receipt.

    Attributes:
        code: E.g. `HISTORY_EXACT_NEAR_LIMIT`, `HISTORY_CAUSAL_BOUNDARY`.
        message: Content-free explanation.
    """

    code: str
    message: str


class Diagnostic(FrozenModel):
    """A content-free diagnostic of a failed or prospective plan.

    Attributes:
        id: `<request_id>:<suffix>`.
        code: E.g. `REQUEST_INPUT_LIMIT`, `LARGEST_REQUIRED_CONTRIBUTOR`.
        contributor: Contributor id or size class, when the diagnostic is about one.
        tokens: Token figure, when relevant.
        message: Content-free explanation.
    """

    id: str
    code: str
    contributor: str | None = None
    tokens: int | None = None
    message: str


class StepPreparation(FrozenModel):
    """What a registered hook decided for one provider call (content-free).

    Attributes:
        hook: The hook's registered name.
        kind: `step` (`prepare_step`) or `invocation` (`prepare_invocation`).
        reason: Why the call was made (`initial`, `tool-round`, `validation-retry`,
            `overflow-recovery`; `invocation`).
        step: The provider call's number within the generation (1-based).
        overridden: Names of the fields the hook overrode (empty: it changed nothing).
        model: The overriding model id, when overridden.
        tool_choice: The overriding tool choice, when overridden.
        active_tools: The tools offered on this call, when narrowed.
        max_output_tokens: The overriding output reserve, when overridden.
        input_budget_optimize_at: The budget's soft watermark, when the budget was overridden.
        input_budget_max: Its strict max, when the budget was overridden.
        new_epoch: Whether this call opened a new planning epoch (its model or budget
            differ from the previous call's), so reduced contributors could re-expand.
    """

    hook: str
    kind: Literal["step", "invocation"] = "step"
    reason: str
    step: int
    overridden: tuple[str, ...] = ()
    model: str | None = None
    tool_choice: str | None = None
    active_tools: tuple[str, ...] | None = None
    max_output_tokens: int | None = None
    input_budget_optimize_at: int | None = None
    input_budget_max: int | None = None
    new_epoch: bool = False


class SettingsRecord(FrozenModel):
    """The model settings a request was sent with, as content-free values.

    Attributes:
        temperature: Sampling temperature, when set.
        top_p: Nucleus sampling mass, when set.
        seed: Sampling seed, when set.
        stop_count: How many stop sequences were sent (the sequences are caller text and
            are not recorded).
        extra_fields: Names of the provider-specific body fields sent (never their values).
        ignored: Settings the provider has no equivalent for and that were not sent (for
            example `seed` on Anthropic).
    """

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop_count: int = 0
    extra_fields: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


class CacheRecord(FrozenModel):
    """What the response cache did for a request, content-free.

    Attributes:
        status: `hit` (a stored reply answered the request: no provider call was made) or
            `miss` (the request was dispatched).
        match: On a hit: `exact` (the whole request was equal) or `semantic` (everything
            but the rendered user turn was equal, and that turn was similar enough).
        similarity: On a semantic hit, the cosine similarity of the two user turns; `1.0`
            on an exact hit; on a miss, the best similarity found below the threshold.
        entry_id: The entry that answered (an opaque id).
        candidates: Entries a semantic lookup compared.
    """

    status: Literal["hit", "miss"]
    match: Literal["exact", "semantic"] | None = None
    similarity: float | None = None
    entry_id: str | None = None
    candidates: int = 0


class RequestReceipt(FrozenModel):
    """The receipt of one planned provider call.

    Attributes:
        id: Request id (supplied by the caller, never generated here).
        model: Model id (`provider:model`).
        input_tokens: Measured size of the complete request.
        max_input_tokens: Effective strict maximum.
        measurement: Counting confidence of `input_tokens`.
        adaptations: Deviations from full exact representation; `[]` for an exact request.
        warnings: Content-free warnings.
        previous_request_id: The previous semantic call of the same loop, if any.
        previous_reason: Why this request follows `previous_request_id` when that one was
            never sent: `revision-moved` when the Thread moved before its dispatch.
        summary_path: Which path prepared the managed-history summary sent with this
            request: `portable` (core-managed support calls) or `provider-native`; `None`
            when no summary was sent.
        agent_id: The agent the generation ran, if any.
        preparations: The hook decisions that shaped this call (`prepare_invocation`
            first, then `prepare_step`); empty when no hook is named.
        settings: The model settings sent with the request; `None` when none were set.
        cache: What the response cache did (`hit` with the match and similarity, or
            `miss`); `None` when the generation uses no cache.
        retry_count: Transport retries of this sealed request: tries of its provider call
            that failed and were retried unchanged (the same figure as the inspection's).
            Stored after the retries happened, so a receipt read while the call still
            runs may count fewer.
        input_gate: What input safety decided about the user turn this request sent
            (policies, decisions, counts); `None` when the generation has no input
            policies.
        output_gate: What terminal safety decided about this request's reply; `None` when
            no output policy judged it (none configured, or the reply was a tool call).
        constraints: The constraints' verdict on this request's reply; `None` when none
            judged it.
    """

    id: str
    model: str
    input_tokens: int
    max_input_tokens: int
    measurement: Confidence
    adaptations: tuple[Adaptation, ...] = ()
    warnings: tuple[ReceiptWarning, ...] = ()
    previous_request_id: str | None = None
    previous_reason: str | None = None
    summary_path: SummaryPath | None = None
    agent_id: str | None = None
    preparations: tuple[StepPreparation, ...] = ()
    settings: SettingsRecord | None = None
    retry_count: int = Field(default=0, ge=0)
    # Left out of the JSON when unset, so receipts of generations without a cache or a
    # gate keep their shape and size.
    cache: CacheRecord | None = Field(default=None, exclude_if=lambda value: value is None)
    input_gate: GateReport | None = Field(default=None, exclude_if=lambda value: value is None)
    output_gate: GateReport | None = Field(default=None, exclude_if=lambda value: value is None)
    constraints: ConstraintReport | None = Field(
        default=None, exclude_if=lambda value: value is None
    )


ContributionClass = Literal["required", "sticky", "elastic"]
RejectionReason = Literal[
    "over-limit", "lower-fidelity", "unprepared", "unavailable", "epoch-floor", "above-threshold"
]


class ContributionRecord(FrozenModel):
    """One contributor as declared.

    Attributes:
        id: Contributor id.
        sources: Ids of its sources (primary, alternatives, members).
        priority: Declared priority.
        classification: `required` (one rung), `sticky` (elastic, owns tools kept on every
            rung but `omitted`) or `elastic`.
        representations: Authorised kinds, highest fidelity first.
        tools: Names of owned tools.
    """

    id: str
    sources: tuple[str, ...]
    priority: int
    classification: ContributionClass
    representations: tuple[RungKind, ...]
    tools: tuple[str, ...] = ()


class CandidateRecord(FrozenModel):
    """One rung of one contributor and what became of it.

    Attributes:
        contributor: Contributor id.
        representation: Rung kind.
        rung: Rung index in the ladder.
        available: Whether the rung could be used at all.
        selected: Whether it was chosen.
        input_tokens: Size of the request with this rung and every other choice as sealed.
        rejection_reason: Why a non-selected rung lost.
    """

    contributor: str
    representation: RungKind
    rung: int
    available: bool
    selected: bool
    input_tokens: int | None = None
    rejection_reason: RejectionReason | None = None


class BreakdownEntry(FrozenModel):
    """Tokens of one class or contributor.

    Attributes:
        name: `system`, `messages`, `message-structure`, `tools`, `output-schema`,
            `current-turn`, `provider-overhead`, `history`, or `context:<id>`.
        tokens: Token count.
    """

    name: str
    tokens: int


class Breakdown(FrozenModel):
    """Where the input tokens go, largest first, zero entries dropped.

    Attributes:
        total: Input tokens.
        attribution: Always `estimated`: the parts are estimates even if the total is exact.
        contributions: Entries, largest first (ties by name).
    """

    total: int
    attribution: Literal["estimated"] = "estimated"
    contributions: tuple[BreakdownEntry, ...]


class Counting(FrozenModel):
    """How the fit was measured.

    Attributes:
        measurement: Counting confidence.
        attribution: Always `estimated` for the per-class split.
        safety_margin_tokens: Margin held back for counting error.
        provider_overhead_tokens: Fixed provider allowance (32).
        output_reserve_tokens: Output tokens reserved.
        context_window: The model's window.
        encoding: Tokenizer encoding of the counts.
    """

    measurement: Confidence
    attribution: Literal["estimated"] = "estimated"
    safety_margin_tokens: int
    provider_overhead_tokens: int
    output_reserve_tokens: int
    context_window: int
    encoding: str


class ArtifactRecord(FrozenModel):
    """A derived artifact a selected rung relies on.

    Attributes:
        contributor: Contributor id.
        kind: `summary` or `offload`.
        artifact_id: Artifact or handle id.
        support_request_ids: Support calls that produced it.
    """

    contributor: str
    kind: Literal["summary", "offload"]
    artifact_id: str | None = None
    support_request_ids: tuple[str, ...] = ()


class SupportRequestRecord(FrozenModel):
    """A support call (e.g. a summary) linked to this request.

    Attributes:
        id: Its request id.
        model: Its model id.
        input_tokens: Its input size.
        max_input_tokens: Its strict max.
        measurement: Its counting confidence.
    """

    id: str
    model: str
    input_tokens: int
    max_input_tokens: int
    measurement: Confidence


class HistoryRecord(FrozenModel):
    """How history was projected.

    Attributes:
        policy: `exact`, `recent` or `managed`.
        messages_before: Messages in the source (aggregate included).
        messages_after: Messages sent.
        groups_before: Listed causal groups (the aggregate counts as one when non-empty).
        groups_after: Groups sent.
        leading_prefix: Messages in the leading system prefix.
        tokens: Content tokens of the history sent.
    """

    policy: Literal["exact", "recent", "managed"]
    messages_before: int
    messages_after: int
    groups_before: int
    groups_after: int
    leading_prefix: int
    tokens: int


class RequestInspection(FrozenModel):
    """The full content-free inspection of one planned request.

    Attributes:
        id: Request id.
        model: Model id.
        contributions: Contributors as declared.
        candidates: Every rung of every elastic contributor with its fate.
        tier: `optimize_at` or `max`: the limit the selection satisfied.
        optimize_at: Soft watermark.
        max_input_tokens: Strict max.
        breakdown: Size by class and contributor.
        measurement: Counting confidence.
        counting: Margin, overhead and reserve used for the fit.
        retry_count: Transport retries of this sealed request (reported by the runtime).
        artifacts: Derived artifacts used.
        support_tools: Support tools added (retrieval for offloads).
        support_requests: Support calls linked to this request.
        linked_request_ids: Previous request id plus support request ids.
        history: Projection record.
        epoch_key: The epoch the plan belongs to.
        retention: Where inspections live.
    """

    id: str
    model: str
    contributions: tuple[ContributionRecord, ...]
    candidates: tuple[CandidateRecord, ...]
    tier: Literal["optimize_at", "max"]
    optimize_at: int
    max_input_tokens: int
    breakdown: Breakdown
    measurement: Confidence
    counting: Counting
    retry_count: int = Field(default=0, ge=0)
    artifacts: tuple[ArtifactRecord, ...] = ()
    support_tools: tuple[str, ...] = ()
    support_requests: tuple[SupportRequestRecord, ...] = ()
    linked_request_ids: tuple[str, ...] = ()
    history: HistoryRecord
    epoch_key: str
    retention: str = "stored with the receipt"
