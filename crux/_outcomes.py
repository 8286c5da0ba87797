"""What the runtime hands back: generations, stream updates, and typed failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from crux.errors import (
    ConfigurationError,
    CruxError,
    ErrorType,
    RequestCompositionError,
    ThreadCommitError,
    ThreadError,
)
from crux.messages import Message
from crux.models import GenerationResult, StepRecord, ThreadCommit, Usage


@dataclass(frozen=True)
class Generation:
    """The outcome of `Runtime.generate`.

    Attributes:
        text: The final assistant text.
        message: The final assistant message.
        result: The workflow's content-free result.
    """

    text: str
    message: Message
    result: GenerationResult

    @property
    def generation_id(self) -> str:
        """The generation id (also the idempotency key)."""
        return self.result.generation_id

    @property
    def thread_commit(self) -> ThreadCommit | None:
        """The Thread commit receipt, for managed generations."""
        return self.result.thread_commit

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        """One record per provider step; `steps[i].request` is the request receipt."""
        return self.result.steps

    @property
    def usage(self) -> Usage:
        """Total usage over the steps."""
        return self.result.usage


@dataclass(frozen=True)
class StreamDelta:
    """A piece of provider text (progress, not yet accepted)."""

    text: str


@dataclass(frozen=True)
class StreamReset:
    """A new provider attempt began: discard the text received so far."""

    attempt: int


@dataclass(frozen=True)
class StreamCommitted:
    """The turn was published; `generation` is the accepted result."""

    generation: Generation


StreamUpdate = StreamDelta | StreamReset | StreamCommitted
"""What `Runtime.stream` yields."""


async def await_result(handle: WorkflowHandle[Any, GenerationResult]) -> GenerationResult:
    """Wait for a generation workflow, turning its failure into the typed domain error."""
    try:
        return await handle.result()
    except WorkflowFailureError as failure:
        raise domain_error(failure) from None


def domain_error(failure: WorkflowFailureError) -> CruxError | WorkflowFailureError:
    """Rebuild the typed domain error from a workflow failure's cause chain."""
    cause: BaseException | None = failure.cause
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type:
            details = list(cause.details)
            code = str(details[0]) if details else ""
            message = cause.message.removeprefix(f"{code}: ") if code else cause.message
            if cause.type == ErrorType.REQUEST_COMPOSITION:
                return RequestCompositionError(
                    code,  # pyright: ignore[reportArgumentType]
                    message,
                    request_id=str(details[2]) if len(details) > 2 else None,
                    diagnostics=_diagnostics(details[1] if len(details) > 1 else None),
                )
            if cause.type == ErrorType.THREAD_COMMIT:
                return ThreadCommitError(message)
            if cause.type == ErrorType.THREAD:
                return ThreadError(code or "commit_failed", message)  # pyright: ignore[reportArgumentType]
            if cause.type == ErrorType.CONFIGURATION:
                return ConfigurationError(message)
        cause = cause.__cause__
    return failure


def _diagnostics(raw: object) -> dict[str, object]:
    if not isinstance(raw, dict):
        return {}
    items: dict[object, object] = raw  # pyright: ignore[reportUnknownVariableType]
    return {str(key): value for key, value in items.items()}
