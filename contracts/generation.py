"""The generation workflow's input and result, as they cross Temporal and the public API.

Every model is frozen, rejects unknown fields and holds no message text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal, cast

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from contracts.acceptance import SuccessHookOutcome
from contracts.cache import CacheSpec
from contracts.gate import ConstraintsSpec, SafetySpec
from contracts.output import OutputSpec
from contracts.settings import AttemptPolicySpec, ModelSettingsSpec, ToolPolicySpec
from planner import Contributor, RequestReceipt
from vocabulary.commits import ThreadCommit, WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_MEMBER_NAME_LENGTH,
    MAX_MODEL_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    MAX_TOKENS,
    MAX_WORKFLOW_ID_BYTES,
    check_model_id,
    check_wire_id,
    member_workflow_id,
    workflow_id_for,
)
from vocabulary.staging import HistorySource

DEFAULT_MAX_TOOL_ROUNDS = 4
"""Tool rounds a generation may take before the model must answer in text."""


class InputBudgetSpec(WireModel):
    """An input budget on the wire (`optimize_at` soft, `max` strict).

    Attributes:
        optimize_at: Soft watermark, in input tokens: past it, managed history refreshes its
            summary after the response.
        max: Strict limit of every provider call's input tokens; a request that cannot fit
            with the authorised losses fails with `RequestCompositionError`
            (`REQUEST_TOO_LARGE`).

    Raises:
        ValueError: (as a validation error) for a value below 1 or `optimize_at > max`.
    """

    # Validated again when passed as an instance: `model_construct` skips validation.
    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    optimize_at: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    max: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)

    @model_validator(mode="after")
    def _ordered(self) -> InputBudgetSpec:
        if self.optimize_at is not None and self.max is not None and self.optimize_at > self.max:
            raise ConfigurationError("optimize_at must not exceed max")
        return self


SummaryStrategy = Literal["adaptive", "regenerate", "rolling", "hierarchical"]

OnMiss = Literal["inline", "recent-only", "fail"]


class HistorySpec(WireModel):
    """The request-history policy on the wire.

    Attributes:
        kind: `exact` (the whole selected path, required), `recent` (a causal-group-safe
            exact suffix bounded by `messages` and/or `tokens`) or `managed` (a derived
            summary of older turns plus an exact recent suffix).
        messages: Message cap of the exact suffix.
        tokens: Token cap of the exact suffix.
        on_miss: Managed only: `inline`, `recent-only` or `fail` when no summary is ready.
        strategy: Managed only: how summaries are prepared.
        summary_model: Managed only: the support model (`provider:model`); the response
            model when `None`.
        provider_native: Managed only: whether a compatible provider-native summary path
            may be used; `False` forces the portable path.
        chunk_tokens: Managed only: content tokens one chunk of a summarised prefix may
            hold; `None` for what one support call of the summary model can take (never
            more). See `planner.summary_choice`, step 7.
        chunk_units: Managed only: units (causal groups) one chunk may hold; `None` for
            no bound (8 for `hierarchical`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    kind: Literal["exact", "recent", "managed"] = "exact"
    messages: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    on_miss: OnMiss = "inline"
    strategy: SummaryStrategy = "adaptive"
    summary_model: str | None = Field(default=None, min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    provider_native: bool = True
    chunk_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    chunk_units: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)

    @field_validator("summary_model")
    @classmethod
    def _summary_model(cls, value: str | None) -> str | None:
        return None if value is None else check_model_id(value)

    @model_validator(mode="after")
    def _chunks_only_managed(self) -> HistorySpec:
        if self.kind != "managed" and (self.chunk_tokens or self.chunk_units):
            raise ConfigurationError("chunk_tokens and chunk_units apply to managed history")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_chunks(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Left out when unset, so the payloads and request fingerprints of policies that do
        # not size their chunks stay what they were before these fields existed.
        data: object = handler(self)
        if not isinstance(data, dict):
            return data
        fields = cast("dict[str, Any]", data)
        for name in ("chunk_tokens", "chunk_units"):
            if fields.get(name) is None:
                fields.pop(name, None)
        return fields


MAX_TOOL_POLICIES = 128
"""Tool policies one generation may carry."""

DEFAULT_STORAGE_WAIT_SECONDS = 30 * 60
"""A storage outage shorter than this only delays a generation."""

MAX_SUCCESS_HOOKS = 16
"""Success hooks one generation may name."""

MAX_TIME_BUDGET_SECONDS = 7 * 86_400
"""The longest time budget a generation may ask for."""


class CompositionSpec(WireModel):
    """Where a generation sits in a composition (a member of `Runtime.parallel`).

    Attributes:
        parent_workflow_id: The workflow id of the composition's parent run.
        member: The member's name in the composition.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    parent_workflow_id: str = Field(min_length=1, max_length=MAX_WORKFLOW_ID_BYTES)
    member: str = Field(min_length=1, max_length=MAX_MEMBER_NAME_LENGTH)

    @field_validator("parent_workflow_id")
    @classmethod
    def _parent(cls, value: str) -> str:
        return check_wire_id(value, "parent_workflow_id", limit=MAX_WORKFLOW_ID_BYTES)

    @field_validator("member")
    @classmethod
    def _member(cls, value: str) -> str:
        return check_wire_id(value, "member", limit=MAX_MEMBER_NAME_LENGTH)


class GenerationInput(WireModel):
    """Input of `ManagedGenerationWorkflow` (JSON-friendly for any Temporal client).

    Attributes:
        generation_id: Caller-supplied idempotency key, scoped to its Thread (ad-hoc
            generations to their own scope); the workflow id is `workflow_id_for(...)`.
        thread_id: The Thread to read and commit to; `None` for an ad-hoc generation.
        model: `provider:model` id (for example `openai:gpt-4o-mini` or `offline:echo`).
        prompt_id: A prompt registered on the worker; `crux.default` renders `input` as the
            user message (a string, or an object with a `message` field).
        input: Inline prompt input. It is recorded in the workflow's start event; callers
            who keep all text out of Temporal stage it instead (`input_ref`).
        input_ref: Id of input staged in PostgreSQL by the facade.
        messages_ref: Id under which the facade staged call-site messages (or, when the
            call passed none, the prompt's prompt-level messages); when set they shadow the
            Thread (the Thread is neither read nor committed).
        owner: Thread owner whose head is read and advanced.
        history: Request-history policy.
        input_budget: Input budget for every provider call of this generation.
        max_output_tokens: Output reserve override.
        contributors: Context contributors (ids, placements and ladders; token counts are
            filled in by the worker from the texts staged under `input_ref`).
        tools: Names of tools registered on the worker that the model may call.
        tool_choice: `auto`, `required` (first call only) or `none`.
        max_tool_rounds: Tool rounds before a final answer is required.
        stream: Stream provider deltas into PostgreSQL for `Runtime.stream` (progress only:
            the accepted turn is the committed one).
        on_revision_moved: What happens when the Thread moved between the read and the
            provider call: `replan` (default) reads the new revision and plans again (each
            plan receipted and linked, reason `revision-moved`); `fail` raises
            `ThreadError("identity_conflict")` before any provider call.
        storage_wait_seconds: How long a stage waits out a PostgreSQL outage (visibly, in
            the `storage_blocked` or `commit_blocked` stage) before the run fails with
            `StorageUnavailableError`.
        agent_id: The agent the generation runs (`crux.agent(id=...)`), recorded on its
            receipts.
        prepare_step: Name of a hook registered on the worker, run (as an activity) before
            each provider call; it may override that call's model, tool choice, active
            tools, output reserve, input budget or settings.
        prepare_invocation: Name of a hook run once, before the first plan, when the
            generation runs as a composition child (`composition` is set); its overrides
            are the baseline of every call.
        settings: Model settings (temperature, top_p, stop, seed, provider extras) sent
            with every provider call and recorded in each receipt; `None` sends none.
        attempt_policy: Retry and timeout of provider attempts; `None` keeps the defaults.
        tool_policies: Retry and timeout per tool name; tools not named keep the defaults.
        approval_tools: Offered tools whose calls wait for an operator's `approve` or `deny`
            before they run.
        approval_timeout_seconds: How long a call waits for its decision; past it the call
            is denied (reason `timeout`). `None` waits without limit.
        composition: Set on a member of a composition (`Runtime.parallel`): its parent's
            workflow id and its member name.
        output: The structured output the reply must match (a JSON schema), validated by
            the worker before the reply is staged; a rejected reply is retried as a new
            planned call, at most `output.max_retries` times.
        cache: The response cache (`crux.cache(...)`): a sealed plan is looked up before it
            is dispatched and a committed reply is written after the commit; `None` (or a
            disabled spec) uses no cache.
        safety: Safety policies (`contracts.gate.SafetySpec`): input policies run on the
            rendered user turn before planning (allow, transform, block); output policies
            on the final reply before the commit (allow, retry, block). Custom policies
            are named and must be registered on the worker.
        constraints: Declarative checks on the final reply (length, pattern, required or
            forbidden substrings); a violating reply is replaced by a corrective attempt,
            at most `constraints.max_retries` times, then `ConstraintError`.
        on_success: Names of success hooks registered on the worker, run after the turn
            is committed (at least once each, never for an uncommitted turn).
        time_budget_seconds: How long the generation may take before the commit, counted
            from the run's start; provider attempts and tool rounds stop when it expires
            (`GenerationTimeoutError`), a commit in flight is awaited. `None`: no budget.
        include_reply: Put the reply text into the outcome (`GenerationOutcome.reply`), for
            a client that reads it from Temporal. Only with the encryption payload codec on
            the worker (`CRUX_CODEC_KEYS`), which keeps it ciphertext in history; without a
            codec the run fails with `ConfigurationError` before anything is sent.
    """

    generation_id: str
    thread_id: str | None = None
    model: str = Field(default="offline:echo", min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    prompt_id: str = Field(default="crux.default", min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    input: Any = None
    input_ref: str | None = None
    messages_ref: str | None = None
    owner: str = "main"
    history: HistorySpec = HistorySpec()
    input_budget: InputBudgetSpec | None = None
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    contributors: list[Contributor] = []
    tools: list[str] = []
    tool_choice: Literal["auto", "required", "none"] | None = None
    max_tool_rounds: int = Field(default=DEFAULT_MAX_TOOL_ROUNDS, ge=0, le=32)
    stream: bool = False
    on_revision_moved: Literal["replan", "fail"] = "replan"
    storage_wait_seconds: int = Field(default=DEFAULT_STORAGE_WAIT_SECONDS, ge=1, le=7 * 86_400)
    agent_id: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    prepare_step: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    prepare_invocation: str | None = Field(
        default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH
    )
    settings: ModelSettingsSpec | None = None
    attempt_policy: AttemptPolicySpec | None = None
    tool_policies: dict[str, ToolPolicySpec] = Field(default_factory=dict[str, ToolPolicySpec])
    approval_tools: list[str] = Field(default_factory=list[str], max_length=MAX_TOOL_POLICIES)
    approval_timeout_seconds: int | None = Field(default=None, ge=1, le=30 * 86_400, strict=True)
    composition: CompositionSpec | None = None
    output: OutputSpec | None = None
    cache: CacheSpec | None = None
    safety: SafetySpec | None = None
    constraints: ConstraintsSpec | None = None
    on_success: list[str] = Field(default_factory=list[str], max_length=MAX_SUCCESS_HOOKS)
    time_budget_seconds: float | None = Field(
        default=None, gt=0, le=MAX_TIME_BUDGET_SECONDS, allow_inf_nan=False
    )
    include_reply: bool = False

    @field_validator("on_success")
    @classmethod
    def _on_success(cls, value: list[str]) -> list[str]:
        for name in value:
            check_wire_id(name, "on_success entry", limit=64)
        if len(set(value)) != len(value):
            raise ConfigurationError("on_success names each hook once")
        return value

    @field_validator("tool_policies")
    @classmethod
    def _tool_policies(cls, value: dict[str, ToolPolicySpec]) -> dict[str, ToolPolicySpec]:
        if len(value) > MAX_TOOL_POLICIES:
            raise ConfigurationError(f"at most {MAX_TOOL_POLICIES} tool policies")
        for name in value:
            check_wire_id(name, "tool_policies key", limit=64)
        return value

    @field_validator("approval_tools")
    @classmethod
    def _approval_tools(cls, value: list[str]) -> list[str]:
        for name in value:
            check_wire_id(name, "approval_tools entry", limit=64)
        return value

    @field_validator("generation_id")
    @classmethod
    def _generation_id(cls, value: str) -> str:
        return check_wire_id(value, "generation_id", limit=MAX_GENERATION_ID_LENGTH)

    @field_validator("thread_id")
    @classmethod
    def _thread_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_wire_id(value, "thread_id", limit=MAX_SCOPE_ID_LENGTH)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        return check_model_id(value)

    @field_validator("agent_id", "prepare_step", "prepare_invocation")
    @classmethod
    def _names(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_wire_id(value, "agent_id or hook name", limit=MAX_SCOPE_ID_LENGTH)

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str) -> str:
        return check_wire_id(value, "owner", limit=MAX_SCOPE_ID_LENGTH)

    @model_validator(mode="after")
    def _addressable(self) -> GenerationInput:
        # The workflow id must fit Temporal's limit once encoded; checked here so that the
        # facade refuses before anything is staged.
        if (
            len(workflow_id_for(self.generation_id, self.thread_id).encode())
            > MAX_WORKFLOW_ID_BYTES
        ):
            raise ConfigurationError(
                f"thread_id and generation_id exceed {MAX_WORKFLOW_ID_BYTES} bytes as a workflow id"
            )
        return self

    @model_validator(mode="after")
    def _settings_fit_provider(self) -> GenerationInput:
        # Anthropic samples with temperatures from 0 to 1: refused here, typed, rather
        # than by the provider after the plan was receipted.
        if (
            self.settings is not None
            and self.settings.temperature is not None
            and self.settings.temperature > 1
            and self.model.partition(":")[0] == "anthropic"
        ):
            raise ConfigurationError("anthropic models take a temperature from 0 to 1")
        return self

    def workflow_id(self) -> str:
        """The one workflow id this generation runs under; the workflow refuses any other.

        `workflow_id_for(generation_id, thread_id)` (`crux/gen/<thread>/<generation>`, or
        `crux/gen/<generation>` ad hoc); for a member of a composition,
        `member_workflow_id(parent_workflow_id, member)`.
        """
        if self.composition is not None:
            return member_workflow_id(self.composition.parent_workflow_id, self.composition.member)
        return workflow_id_for(self.generation_id, self.thread_id)

    def start_payload(self) -> dict[str, Any]:
        """This input as a workflow start payload: only the fields that differ from defaults.

        The start event is history too; the workflow validates the payload and fills the
        defaults back in, so the run sees an equal input. Only the top level is left out:
        nested shapes (history policy, contributors) are sent whole.
        """
        full = self.model_dump(mode="json")
        return {
            name: full[name]
            for name, field in type(self).model_fields.items()
            if field.is_required()
            or getattr(self, name) != field.get_default(call_default_factory=True)
        }


class Usage(WireModel):
    """Token usage reported by a provider.

    Attributes:
        input_tokens: Input tokens the provider counted.
        output_tokens: Output tokens it generated.
    """

    input_tokens: int = 0
    output_tokens: int = 0


class StepRecord(WireModel):
    """One provider step of a generation (content-free).

    Attributes:
        attempt: Attempt number within the generation (1-based).
        request: The request receipt of the sealed plan that was sent.
        usage: Usage the provider reported.
        finish_reason: The provider's finish reason.
        output_tokens: Size of the staged output.
    """

    attempt: int
    request: RequestReceipt
    usage: Usage
    finish_reason: str
    output_tokens: int = 0


class GenerationResult(WireModel):
    """The complete, content-free result of a generation (text stays in PostgreSQL).

    The commit stores it in the generation ledger; the workflow returns only its ids and
    figures (`GenerationOutcome`) and the facade loads this from the ledger.

    Attributes:
        generation_id: The caller's generation id.
        thread_id: The Thread, when managed.
        output_message_id: Id of the final assistant message (in the Thread, or in
            generation staging for ad-hoc generations).
        thread_commit: The commit receipt for managed generations.
        steps: One record per provider step.
        usage: Total usage over the steps.
        history_source: `thread`, `caller-messages` (call-site or prompt-level messages)
            or `none`.
        replayed: `True` when this generation had already completed and its stored result
            was returned.
        hooks: How each success hook of the run ended (empty without hooks, and on a
            replay, whose hooks ran with the first run).
    """

    generation_id: str
    thread_id: str | None = None
    output_message_id: str
    thread_commit: ThreadCommit | None = None
    steps: tuple[StepRecord, ...] = ()
    usage: Usage = Usage()
    history_source: HistorySource = "none"
    replayed: bool = False
    hooks: tuple[SuccessHookOutcome, ...] = Field(default=(), exclude_if=lambda value: not value)


class StepFigures(WireModel):
    """One provider step as Temporal history carries it: its request id and figures.

    The receipt itself was stored in PostgreSQL before the attempt was sent.

    Attributes:
        attempt: Attempt number within the generation (1-based).
        request_id: Id of the stored receipt of the sealed plan that was sent.
        usage: Usage the provider reported.
        finish_reason: The provider's finish reason.
        output_tokens: Size of the staged output.
    """

    attempt: int
    request_id: str
    usage: Usage
    finish_reason: str
    output_tokens: int = 0


class GenerationOutcome(WireModel):
    """What `ManagedGenerationWorkflow` returns: ids and figures, never receipts.

    The complete `GenerationResult` (every step's receipt) is stored in PostgreSQL with the
    committed turn; the facade loads it from there, so history stays flat.

    Attributes:
        generation_id: The caller's generation id.
        thread_id: The Thread, when managed.
        output_message_id: Id of the final assistant message.
        thread_commit: The commit receipt for managed generations.
        request_ids: Ids of the stored receipts of the sent requests, one per step.
        usage: Total usage over the steps.
        history_source: `thread`, `caller-messages` or `none`.
        replayed: `True` when this generation had already completed.
        hooks: How each success hook ended (left out of the payload when there are none,
            so outcomes of generations without hooks keep their shape).
        reply: The reply text, only when the input asked for it (`include_reply`, with the
            encryption payload codec); left out of the payload otherwise. `None` also when
            the reply is no longer stored (redacted, or an erased ad-hoc reply).
    """

    generation_id: str
    thread_id: str | None = None
    output_message_id: str
    thread_commit: ThreadCommit | None = None
    request_ids: tuple[str, ...] = ()
    usage: Usage = Usage()
    history_source: HistorySource = "none"
    replayed: bool = False
    hooks: tuple[SuccessHookOutcome, ...] = Field(default=(), exclude_if=lambda value: not value)
    # Left out when unset: outcomes that carry no reply keep the shape they always had.
    reply: str | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def of(cls, result: GenerationResult) -> GenerationOutcome:
        """The outcome of a stored result."""
        return cls(
            generation_id=result.generation_id,
            thread_id=result.thread_id,
            output_message_id=result.output_message_id,
            thread_commit=result.thread_commit,
            request_ids=tuple(step.request.id for step in result.steps),
            usage=result.usage,
            history_source=result.history_source,
            replayed=result.replayed,
            hooks=result.hooks,
        )


_LATER_FIELDS = (
    "settings",
    "agent_id",
    "prepare_step",
    "prepare_invocation",
    "composition",
    "output",
    "safety",
    "constraints",
)
"""Fields added after fingerprints were first stored."""


def request_fingerprint(request: GenerationInput, texts: Iterable[object]) -> str:
    """A content-free fingerprint of what a generation asks for.

    Hashes the request's settings (model, prompt, history, budget, contributors, tools)
    and the JSON of the rendered texts it stages, so a reused `generation_id` with
    different content is told apart from a replay without storing any of the content.

    Args:
        request: The generation input (its refs, inline input and stream flag are ignored:
            they name where the content is, not what it is).
        texts: The staged messages (or their JSON) in a fixed order.
    """
    settings = request.model_dump(
        mode="json",
        # Run policies (how to wait, whether to re-plan) are not what is asked for.
        exclude={
            "generation_id",
            "input",
            "input_ref",
            "messages_ref",
            "stream",
            "on_revision_moved",
            "storage_wait_seconds",
            "attempt_policy",
            "tool_policies",
            "approval_tools",
            "approval_timeout_seconds",
            # Whether a reply may come from the cache is how the run proceeds, not what
            # it asks for.
            "cache",
            # What happens after the commit, and how long the run may take, do not change
            # what is asked for.
            "on_success",
            "time_budget_seconds",
            # Where the reply is delivered, not what is asked for.
            "include_reply",
        },
    )
    for name in _LATER_FIELDS:
        # Left out when unset, so fingerprints of requests that do not use a field stay as
        # they were before the field existed.
        if settings.get(name) is None:
            settings.pop(name, None)
    digest = hashlib.sha256()
    digest.update(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode())
    for text in texts:
        encoded = json.dumps(text, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        digest.update(hashlib.sha256(encoded.encode()).digest())
    return digest.hexdigest()
