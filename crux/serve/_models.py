"""The HTTP API's request and response bodies (its OpenAPI schemas come from these).

Thread and generation ids in bodies are the caller's own; the tenant scope is applied by
the routes. Every model rejects unknown fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.generation import GenerationResult, HistorySpec, InputBudgetSpec
from contracts.settings import ModelSettingsSpec
from vocabulary.ids import MAX_GENERATION_ID_LENGTH, MAX_SCOPE_ID_LENGTH, MAX_TOKENS
from vocabulary.messages import JsonValue, Message, Part

MAX_BATCH = 256
"""Messages one append or redaction may carry."""


class Body(BaseModel):
    """Base of request and response bodies: unknown fields are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorInfo(Body):
    """What went wrong, content-free.

    Attributes:
        type: The error family (`ThreadError`, `ConfigurationError`, ...).
        code: A stable code within the family (`not_found`, `identity_conflict`, ...).
        message: One line naming the cause, never message text.
        retryable: Whether the same request may succeed later.
    """

    type: str
    code: str
    message: str
    retryable: bool = False


class ErrorBody(Body):
    """Every error response."""

    error: ErrorInfo


class AppendRequest(Body):
    """Publish messages to a Thread as one causal group.

    Attributes:
        messages: The group, in order; give each message an `id` so that a retried append
            replays (`replayed: true`) instead of publishing twice.
        after: A group end to publish after; the Thread's head when omitted.
    """

    messages: list[Message] = Field(min_length=1, max_length=MAX_BATCH)
    after: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)


class EditRequest(Body):
    """Publish an edited copy of a user message (alone in its group) and select it.

    Attributes:
        message_id: The message to edit.
        content: The new content.
        id: The edited copy's id (derived when omitted).
        metadata: The copy's metadata (the original's when omitted).
    """

    message_id: str = Field(min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    content: str | list[Part]
    id: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    metadata: dict[str, JsonValue] | None = None


class MessageRef(Body):
    """Names one message of the Thread (`select`, `remove`)."""

    message_id: str = Field(min_length=1, max_length=MAX_SCOPE_ID_LENGTH)


class RedactRequest(Body):
    """Erase messages irreversibly, leaving tombstones."""

    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)


class StageRequest(Body):
    """Stage a user turn for a generation a plain Temporal client will start.

    Attributes:
        generation_id: The generation's id (its idempotency key).
        thread_id: The Thread it commits to; an ad-hoc generation when omitted.
        message: The user message (text, or parts such as images).
        system: System text for the generation, if any.
        messages: Call-site messages that shadow the Thread (it is then neither read nor
            committed), for a conversation the caller keeps itself.
    """

    generation_id: str = Field(min_length=1, max_length=MAX_GENERATION_ID_LENGTH)
    thread_id: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    message: str | list[Part]
    system: str | None = None
    messages: list[Message] | None = Field(default=None, max_length=4096)


class StartFields(Body):
    """The `GenerationInput` fields a plain client passes to `start_workflow` unchanged.

    Attributes:
        generation_id: As stored (an ad-hoc generation's carries the tenant's prefix).
        thread_id: As stored (with the tenant's prefix); `null` ad hoc.
        input_ref: Where the staged turn is.
        messages_ref: Where staged call-site messages are, when the request had any.
    """

    generation_id: str
    thread_id: str | None = None
    input_ref: str
    messages_ref: str | None = None


class StagedInput(Body):
    """A staged user turn, and how to start its generation from any Temporal client.

    Attributes:
        input_ref: The staging reference (`GenerationInput.input_ref`).
        workflow_id: The workflow id to start (`crux/gen/...`), with
            `workflowIdConflictPolicy: USE_EXISTING` so that a retried start attaches.
        start: The input fields to send as they are; add `model` and any other field.
        replayed: `true` when the generation had already completed: starting it again
            returns the stored outcome.
    """

    input_ref: str
    workflow_id: str
    start: StartFields
    replayed: bool = False


class GenerateRequest(Body):
    """Run one managed generation and wait for its reply.

    Attributes:
        message: The user message.
        thread_id: The Thread to read and commit to; ad hoc when omitted.
        generation_id: The idempotency key (random when omitted: not retry-safe).
        messages: Call-site messages that shadow the Thread for this call.
        model: `provider:model`; the server's default when omitted.
        history: The request-history policy.
        input_budget: `optimize_at` and `max` input tokens.
        max_output_tokens: The output reserve.
        settings: Model settings (temperature, top_p, stop, seed).
    """

    message: str
    thread_id: str | None = Field(default=None, min_length=1, max_length=MAX_SCOPE_ID_LENGTH)
    generation_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_GENERATION_ID_LENGTH
    )
    messages: list[Message] | None = Field(default=None, max_length=4096)
    model: str | None = Field(default=None, min_length=1, max_length=256)
    history: HistorySpec | None = None
    input_budget: InputBudgetSpec | None = None
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    settings: ModelSettingsSpec | None = None


class GenerationReply(Body):
    """A completed generation and its reply.

    Attributes:
        generation_id: The caller's generation id.
        thread_id: The caller's Thread id; `null` ad hoc.
        text: The reply text; `null` when it is no longer stored (redacted, or an
            ad-hoc reply erased after it was returned).
        message: The reply message, when stored.
        result: The content-free result: commit receipt, steps with their request
            receipts, usage.
    """

    generation_id: str
    thread_id: str | None = None
    text: str | None = None
    message: Message | None = None
    result: GenerationResult


class Health(Body):
    """A health or readiness answer.

    Attributes:
        status: `ok`, `ready` or `unavailable`.
        failed: The dependencies that did not answer (`postgresql`, `temporal`).
    """

    status: Literal["ok", "ready", "unavailable"]
    failed: list[str] = []


class CodecPayload(Body):
    """A payload in Temporal's protobuf JSON: metadata values and data are base64."""

    # Fields newer Temporal versions add to a payload are not the codec's business.
    model_config = ConfigDict(frozen=True, extra="ignore")

    metadata: dict[str, str] = Field(default_factory=dict[str, str])
    data: str = ""


class CodecPayloads(Body):
    """The body of the codec server's `/encode` and `/decode` (Temporal's codec protocol)."""

    payloads: list[CodecPayload] = Field(max_length=10_000)
