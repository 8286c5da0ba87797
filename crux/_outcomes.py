"""What the runtime hands back: generations, stream updates, and typed failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError, TimeoutError

from contracts.generation import GenerationResult, StepRecord, Usage
from storage import GenerationStore
from vocabulary.commits import ThreadCommit
from vocabulary.details import ErrorDetails, decode_details, encode_details
from vocabulary.errors import (
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    ErrorType,
    GenerationFailedError,
    OutputValidationError,
    PreparationError,
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderNotFoundError,
    ProviderResponseError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RequestCompositionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)
from vocabulary.ids import generation_key
from vocabulary.messages import Message


@dataclass(frozen=True)
class Generation:
    """The outcome of `Runtime.generate`.

    Attributes:
        text: The final assistant text.
        message: The final assistant message.
        result: The workflow's content-free result.
        output: The structured output, when the call asked for one: an instance of the
            pydantic model, or the parsed JSON value for a JSON schema; else `None`.
    """

    text: str
    message: Message
    result: GenerationResult
    output: Any = None

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


class Finished(BaseModel):
    """What the facade needs of a generation workflow's answer.

    The workflow returns ids and figures (`GenerationOutcome`); runs of earlier releases
    returned the complete `GenerationResult`. Both decode into this, and the complete
    result is then loaded from PostgreSQL, where the commit stored it.

    Attributes:
        generation_id: The caller's generation id.
        thread_id: The Thread, when managed.
        thread_commit: The commit receipt as this run reported it (replay flags included).
        replayed: `True` when the generation had already completed.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    generation_id: str
    thread_id: str | None = None
    thread_commit: ThreadCommit | None = None
    replayed: bool = False


async def await_result(handle: WorkflowHandle[Any, Finished]) -> Finished:
    """Wait for a generation workflow, turning its failure into the typed domain error."""
    try:
        return await handle.result()
    except WorkflowFailureError as failure:
        raise domain_error(failure) from None


async def stored_result(generations: GenerationStore, finished: Finished) -> GenerationResult:
    """The complete result of a finished generation, receipts included, from PostgreSQL.

    Raises:
        ThreadError: `not_found` when the result is no longer stored (its Thread was
            deleted since).
    """
    stored = await generations.find_result(
        generation_key(finished.generation_id, finished.thread_id)
    )
    if stored is None:
        raise ThreadError("not_found", "the generation's result is no longer stored")
    return stored.model_copy(
        update={"replayed": finished.replayed, "thread_commit": finished.thread_commit}
    )


_PROVIDER_TYPES: dict[str, type[ProviderError]] = {
    ErrorType.PROVIDER: ProviderError,
    ErrorType.PROVIDER_HTTP: ProviderHTTPError,
    ErrorType.PROVIDER_AUTH: ProviderAuthError,
    ErrorType.PROVIDER_NOT_FOUND: ProviderNotFoundError,
    ErrorType.PROVIDER_UNAVAILABLE: ProviderUnavailableError,
    ErrorType.PROVIDER_TIMEOUT: ProviderTimeoutError,
    ErrorType.PROVIDER_CONNECTION: ProviderConnectionError,
    ErrorType.PROVIDER_RESPONSE: ProviderResponseError,
    ErrorType.CONTEXT_TOO_LONG: ContextOverflowError,
}


def domain_error(failure: WorkflowFailureError) -> CruxError:
    """Rebuild the typed domain error from a workflow failure's cause chain.

    Always a `CruxError`: a failure nobody classified becomes `GenerationFailedError`, so
    no `WorkflowFailureError` reaches the caller.
    """
    cause: BaseException | None = failure.__cause__
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type:
            rebuilt = _from_application_error(cause)
            if rebuilt is not None:
                return rebuilt
        elif isinstance(cause, CancelledError):
            return GenerationFailedError("cancelled", "the generation was cancelled")
        elif isinstance(cause, TerminatedError):
            return GenerationFailedError("terminated", "the generation was terminated")
        elif isinstance(cause, TimeoutError):
            return GenerationFailedError("timed_out", "the generation timed out")
        cause = cause.__cause__
    return GenerationFailedError("internal", "the generation failed")


def _from_application_error(cause: ApplicationError) -> CruxError | None:
    details = decode_details(cause.details, cause.type)
    code = details.code or ""
    message = cause.message.removeprefix(f"{code}: ") if code else cause.message
    kind = cause.type
    if kind == ErrorType.REQUEST_COMPOSITION:
        return RequestCompositionError(
            code,  # pyright: ignore[reportArgumentType]
            message,
            request_id=details.request_id,
            diagnostics=_diagnostics(details.diagnostics),
        )
    if kind == ErrorType.THREAD_COMMIT:
        if code == "abandoned":
            return ThreadCommitError(message, code="abandoned")
        return ThreadCommitError(message)
    if kind == ErrorType.THREAD:
        return ThreadError(code or "commit_failed", message)  # pyright: ignore[reportArgumentType]
    if kind == ErrorType.CONFIGURATION:
        return ConfigurationError(cause.message)
    if kind == ErrorType.STORAGE_UNAVAILABLE:
        return StorageUnavailableError(cause.message)
    if kind == ErrorType.INTERNAL:
        return GenerationFailedError("internal", cause.message)
    if kind == ErrorType.OUTPUT_VALIDATION:
        defects: object = details.diagnostics.get("defects", [])
        attempts = details.diagnostics.get("attempts", 0)
        listed: list[object] = list(defects) if isinstance(defects, list) else []  # pyright: ignore[reportUnknownArgumentType]
        return OutputValidationError(
            tuple(str(defect) for defect in listed),
            attempts=attempts if isinstance(attempts, int) else 0,
            request_id=details.request_id,
        )
    if kind == ErrorType.PREPARATION:
        return PreparationError(code or "hook_failed", message)
    provider_type = _PROVIDER_TYPES.get(kind or "")
    if provider_type is not None:
        return _provider_error(provider_type, cause, details)
    return None


def _provider_error(
    kind: type[ProviderError], cause: ApplicationError, details: ErrorDetails
) -> ProviderError:
    """Rebuild a provider error from its details (provider, status, host, model)."""
    provider = details.provider or "provider"
    status = details.status
    if issubclass(kind, ProviderHTTPError):
        if kind is ContextOverflowError:
            error: ProviderError = ContextOverflowError(
                provider, status if status is not None else 400, error_type=details.code
            )
        else:
            error = kind(
                provider,
                status if status is not None else 0,
                error_type=details.code,
                should_retry=not cause.non_retryable,
            )
    else:
        error = kind(provider, "call failed")
    error.host = details.host
    error.model = details.model
    error.retryable = not cause.non_retryable
    # The message the worker composed (it names the remedy) is kept as is.
    error.args = (cause.message,)
    return error


def _diagnostics(raw: object) -> dict[str, object]:
    if not isinstance(raw, dict):
        return {}
    items: dict[object, object] = raw  # pyright: ignore[reportUnknownVariableType]
    return {str(key): value for key, value in items.items()}


def rebuild_error(
    error_type: str | None, message: str, details: ErrorDetails, *, non_retryable: bool = True
) -> CruxError:
    """The typed domain error of a recorded failure (its type, message and details).

    A failure recorded by a workflow (a parallel member's, say) is rebuilt exactly as a
    workflow failure would be: a type nobody classified becomes `GenerationFailedError`.
    """
    cause = ApplicationError(
        message, encode_details(details), type=error_type, non_retryable=non_retryable
    )
    rebuilt = _from_application_error(cause) if error_type else None
    return rebuilt or GenerationFailedError("internal", "the generation failed")
