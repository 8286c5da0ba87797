"""The keyword options of `Runtime.generate`, `stream`, `preview` and `parallel`, spelled once.

Each method takes its options as `**options: Unpack[...]` of one of these typed dicts, so a
type checker (and an IDE) checks every keyword's name and type, and each option is named,
typed and described here only. The sets nest: every call plans with `PlanOptions`;
`preview` adds what the prompt renders (`PreviewOptions`); `parallel` adds how a run
proceeds (`RunOptions`); `generate` and `stream` take both and the generation's own
identity (`CallOptions`).

An option left out takes its default: `None` (the prompt's, agent's or runtime's value
applies) unless its description names another. The defaults that are not `None` are those of
`GenerationInput`, the workflow's input, which is where the builder takes them from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from contracts.cache import CacheSpec
from contracts.gate import ConstraintsSpec, SafetySpec
from contracts.generation import HistorySpec, InputBudgetSpec
from contracts.settings import AttemptPolicySpec, ModelSettingsSpec
from crux.hooks import SuccessHook
from crux.output import Output
from vocabulary.messages import Message

__all__ = ["CallOptions", "PlanOptions", "PreviewOptions", "RunOptions"]


class PlanOptions(TypedDict, total=False):
    """What every call is planned with (`generate`, `stream`, `preview`, `parallel`)."""

    thread: object | None
    """A Thread handle or id; overrides a Thread bound in the prompt's `use`."""

    model: str | None
    """`provider:model`; the agent's, else the runtime's default, when omitted."""

    history: HistorySpec | None
    """Request-history policy (`crux.history(...)`); overrides the prompt's."""

    input_budget: Mapping[str, int] | InputBudgetSpec | None
    """`{"optimize_at": ..., "max": ...}`, merged field by field over the agent's and the
    prompt's."""

    max_output_tokens: int | None
    """Output reserve for this call; the agent's when omitted."""

    owner: str
    """The Thread owner whose head is read and advanced (`main` by default)."""

    settings: ModelSettingsSpec | Mapping[str, Any] | None
    """Model settings (`crux.model_settings(...)` or a mapping), merged field by field over
    the agent's and the prompt's."""

    output: Output | type[BaseModel] | Mapping[str, Any] | None
    """Structured output (a pydantic model class, a JSON schema or `crux.output(...)`);
    replaces the agent's and the prompt's. The reply is validated before it is staged; a
    rejected reply is asked for again (a new planned call, reason `validation-retry`) up to
    its `max_retries`, then `OutputValidationError`. `Generation.output` is the typed
    value."""


class PreviewOptions(PlanOptions, total=False):
    """`PlanOptions` and what the prompt renders: the options of `preview`."""

    input: Any
    """The prompt's input."""

    messages: Sequence[Message | Mapping[str, Any]] | None
    """Call-site messages: they shadow the Thread for this call (it is neither read nor
    committed)."""


class RunOptions(PlanOptions, total=False):
    """`PlanOptions` and how a run proceeds: the options of `parallel` (for every member)."""

    safety: SafetySpec | Sequence[object] | None
    """Safety policies (`crux.safety(input=[...], output=[...])`, or a list of input
    policies); replace the agent's and the prompt's. Input policies judge the rendered user
    turn before planning (allow, mask, block: `SafetyError`, nothing sent); output policies
    judge the final reply before the commit (allow, retry, block)."""

    constraints: ConstraintsSpec | Sequence[object] | None
    """Constraints on the final reply (`crux.constraints(...)` or a list); replace the
    agent's and the prompt's. A violating reply is asked for again (reason
    `constraint-retry`) up to their `max_retries`, then `ConstraintError`."""

    on_success: Sequence[SuccessHook | str] | None
    """Success hooks (registered on the worker) run after the turn is committed, at least
    once each; replace the agent's and the prompt's. `Generation.hooks` says how each
    ended."""

    time_budget_seconds: float | None
    """How long the generation may take before its commit, counted from its start:
    provider attempts and tool rounds stop when it expires (`GenerationTimeoutError`); a
    commit in flight is waited for, and the error says whether the turn was committed."""

    tool_choice: Literal["auto", "required", "none"] | None
    """`auto`, `required` (first call) or `none` for the prompt's tools; the agent's when
    omitted."""

    max_tool_rounds: int
    """Tool rounds before a text answer is required (`DEFAULT_MAX_TOOL_ROUNDS` of
    `contracts.generation` by default)."""

    on_revision_moved: Literal["replan", "fail"]
    """`replan` (the default) re-reads the Thread and plans again when another turn landed
    before this call was sent; `fail` raises `ThreadError("identity_conflict")` instead,
    before any provider call."""

    storage_wait_seconds: int
    """How long the run waits out a PostgreSQL outage before it fails with
    `StorageUnavailableError` (`DEFAULT_STORAGE_WAIT_SECONDS` of `contracts.generation` by
    default)."""

    attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None
    """Retry and timeout of the provider attempts (`crux.attempt_policy(...)` or a
    mapping), merged field by field over the agent's and the runtime's."""

    cache: CacheSpec | Mapping[str, Any] | bool | None
    """The response cache (`crux.cache(...)`, a mapping of its fields, or `True` for the
    defaults); replaces the agent's and the prompt's whole. `False` switches theirs off."""
    timeout: float | None
    """Seconds to wait for the reply (of every member, for `parallel`); `None` (the default)
    waits without limit. When they pass, the run is asked to cancel and
    `GenerationTimeoutError` is raised; the run is started with a workflow execution
    timeout of `timeout` plus a minute, so it cannot outlive a caller that died.
    Independently of it, a run that no worker takes fails within seconds with
    `NoWorkerError`."""


class CallOptions(PreviewOptions, RunOptions, total=False):
    """Every option of one managed generation: the options of `generate` and `stream`."""

    generation_id: str | None
    """Idempotency key: the same id yields one turn, however often it is started. A random
    id is used when omitted (not retry-safe)."""

    approval_timeout_seconds: int | None
    """How long a call of a tool that requires approval waits for its decision before it is
    denied with reason `timeout`; the runtime's when omitted."""
