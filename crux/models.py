"""Wire models shared by the facade, the activities and the workflows.

Everything here crosses a boundary (Temporal payloads, PostgreSQL rows, the public API), so
every model is frozen, rejects unknown fields and holds no message text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner import Contributor, RequestReceipt

DEFAULT_MAX_TOOL_ROUNDS = 4
"""Tool rounds a generation may take before the model must answer in text."""


class WireModel(BaseModel):
    """Base for boundary models: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ThreadCommit(WireModel):
    """The receipt of one publication to a Thread (an append or a managed turn).

    Attributes:
        status: `selected` when the publication advanced the selected head, `alternative`
            when it was published beside a head that had moved.
        message_ids: Ids of the published causal group, in order.
        parent_id: The group's parent (the observed head), `None` at the root.
        selected_head: The selected head right after this publication (for an alternative,
            not the new branch tip).
        committed_at: Commit time shared by every message of the group.
        replayed: `True` when an identical retry returned the stored receipt.
    """

    status: Literal["selected", "alternative"]
    message_ids: tuple[str, ...]
    parent_id: str | None = None
    selected_head: str
    committed_at: datetime
    replayed: bool = False


class InputBudgetSpec(WireModel):
    """An input budget on the wire (`optimize_at` soft, `max` strict)."""

    optimize_at: int | None = None
    max: int | None = None


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
    """

    kind: Literal["exact", "recent", "managed"] = "exact"
    messages: int | None = None
    tokens: int | None = None
    on_miss: OnMiss = "inline"
    strategy: SummaryStrategy = "adaptive"
    summary_model: str | None = None
    provider_native: bool = True


class GenerationInput(WireModel):
    """Input of `ManagedGenerationWorkflow` (JSON-friendly for any Temporal client).

    Attributes:
        generation_id: Caller-supplied idempotency key; the workflow id is
            `crux/gen/<thread_id or "adhoc">/<generation_id>`.
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
    """

    generation_id: str
    thread_id: str | None = None
    model: str = "offline:echo"
    prompt_id: str = "crux.default"
    input: Any = None
    input_ref: str | None = None
    messages_ref: str | None = None
    owner: str = "main"
    history: HistorySpec = HistorySpec()
    input_budget: InputBudgetSpec | None = None
    max_output_tokens: int | None = None
    contributors: list[Contributor] = []
    tools: list[str] = []
    tool_choice: Literal["auto", "required", "none"] | None = None
    max_tool_rounds: int = Field(default=DEFAULT_MAX_TOOL_ROUNDS, ge=0, le=32)
    stream: bool = False


class Usage(WireModel):
    """Token usage reported by a provider."""

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
    """Result of `ManagedGenerationWorkflow` (content-free; text stays in PostgreSQL).

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
    """

    generation_id: str
    thread_id: str | None = None
    output_message_id: str
    thread_commit: ThreadCommit | None = None
    steps: tuple[StepRecord, ...] = ()
    usage: Usage = Usage()
    history_source: Literal["thread", "caller-messages", "none"] = "none"
    replayed: bool = False


def workflow_id_for(generation_id: str, thread_id: str | None) -> str:
    """The workflow id of a generation: `crux/gen/<thread or adhoc>/<generation_id>`."""
    return f"crux/gen/{thread_id or 'adhoc'}/{generation_id}"
