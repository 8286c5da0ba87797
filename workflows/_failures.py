"""How a generation fails: typed, content-free, and without leaving staged content behind."""

from __future__ import annotations

import contextlib

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutType,
    is_cancelled_exception,
)
from temporalio.exceptions import TimeoutError as AttemptTimeout

from contracts import stubs
from contracts.activities import (
    DiscardGenerationInput,
)
from contracts.decoding import decode_input
from contracts.generation import GenerationInput
from planner.steps import Fail
from vocabulary.details import ErrorDetails, decode_details, encode_details
from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    ErrorType,
    OutputValidationError,
    ProviderTimeoutError,
    RequestCompositionError,
    ThreadError,
)
from vocabulary.stages import Stage
from workflows import _options
from workflows._stages import StageReporter
from workflows._storage_wait import application_cause


def validated(raw: object) -> GenerationInput:
    """The generation input, or a typed, non-retryable `ConfigurationError` failure."""
    try:
        return decode_input(raw, GenerationInput, what="generation input")
    except ConfigurationError as error:
        raise ApplicationError(
            str(error), type=ErrorType.CONFIGURATION, non_retryable=True
        ) from None


def decision_failure(stages: StageReporter, action: Fail) -> ApplicationError:
    """The typed, content-free failure of a `Fail` decision."""
    error = action.error
    if isinstance(error, RequestCompositionError):
        stages.set(Stage.FAILED, error.code)
        details = ErrorDetails(
            code=error.code, request_id=action.request_id, diagnostics=error.diagnostics
        )
        error_type = ErrorType.REQUEST_COMPOSITION
    elif isinstance(error, ThreadError):
        stages.set(Stage.FAILED, error.code)
        details = ErrorDetails(code=error.code)
        error_type = ErrorType.THREAD
    elif isinstance(error, OutputValidationError):
        stages.set(Stage.FAILED, "output invalid")
        details = ErrorDetails(
            code="output_invalid",
            request_id=action.request_id,
            diagnostics={"defects": list(error.defects), "attempts": error.attempts},
        )
        error_type = ErrorType.OUTPUT_VALIDATION
    else:
        stages.set(Stage.FAILED)
        details = ErrorDetails()
        error_type = ErrorType.INTERNAL
    return ApplicationError(
        str(error), encode_details(details), type=error_type, non_retryable=True
    )


def attempt_timed_out(request: GenerationInput, error: ActivityError) -> ApplicationError | None:
    """`ProviderTimeoutError` when a provider attempt outlived its attempt timeout.

    Temporal ends such an attempt from outside, so the activity cannot classify it; without
    this the caller would see a bare workflow timeout instead of the provider's typed,
    retryable error. `None` for every other failure (a heartbeat timeout is a lost worker,
    not a slow provider).
    """
    cause = error.cause
    if not isinstance(cause, AttemptTimeout) or cause.type != TimeoutType.START_TO_CLOSE:
        return None
    provider = request.model.partition(":")[0]
    timed_out = ProviderTimeoutError(
        provider, "no answer within the attempt timeout", model=request.model
    )
    return ApplicationError(
        timed_out.explain(),
        encode_details(ErrorDetails(provider=provider, model=request.model)),
        type=ErrorType.PROVIDER_TIMEOUT,
        non_retryable=False,
    )


def commit_rejected(
    stages: StageReporter, error: ActivityError | ApplicationError
) -> ApplicationError:
    """`ThreadCommitError`: the commit was rejected, so no success may be reported."""
    cause = application_cause(error)
    details = cause.details if cause is not None else ()
    code = decode_details(details, cause.type if cause is not None else None).code
    stages.set(Stage.FAILED, "commit rejected")
    return ApplicationError(
        "the accepted turn could not be published",
        encode_details(ErrorDetails(code=code or "commit_failed")),
        type=ErrorType.THREAD_COMMIT,
        non_retryable=True,
    )


async def discard_after(
    stages: StageReporter, request: GenerationInput, error: BaseException
) -> None:
    """Remove what a failed or cancelled run staged; nothing of it may stay behind.

    Only for outcomes that end the run: Temporal failures, typed domain errors and
    cancellation. A bug that fails the workflow task (and is retried) keeps its staging,
    and an eviction unwinds without issuing commands.
    """
    cancelled = is_cancelled_exception(error)
    if not (cancelled or isinstance(error, FailureError | CruxError)):
        return
    stages.set(Stage.CANCELLED if cancelled else Stage.FAILED, "discarding staged content")
    stages.publish()
    # After a cancellation was delivered, new activities run normally; a second
    # cancellation request would not reach this one either way (it is the last step).
    with contextlib.suppress(ActivityError):
        await workflow.execute_activity(
            stubs.discard_generation,
            DiscardGenerationInput(
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                refused=_refused(error),
            ),
            **_options.with_summary(_options.DISCARD_GENERATION, "discard staging"),
        )


def _refused(error: BaseException) -> bool:
    """Whether the run failed because its request was invalid (a `ConfigurationError`)."""
    if isinstance(error, ConfigurationError):
        return True
    if isinstance(error, ActivityError | ApplicationError):
        cause = application_cause(error)
        return cause is not None and cause.type == ErrorType.CONFIGURATION
    return False
