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
from contracts.failures import application_error, internal_error
from contracts.generation import GenerationInput
from planner.steps import Fail
from vocabulary.details import decode_details
from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    ErrorType,
    OutputValidationError,
    ProviderTimeoutError,
    RequestCompositionError,
    ThreadError,
)
from vocabulary.gate_errors import ConstraintError, SafetyError
from vocabulary.stages import Stage
from workflows import _options
from workflows._stages import StageReporter
from workflows._storage_wait import application_cause


def validated(raw: object) -> GenerationInput:
    """The generation input, or a typed `ConfigurationError` failure."""
    try:
        return decode_input(raw, GenerationInput, what="generation input")
    except ConfigurationError as error:
        raise application_error(error) from None


def decision_failure(stages: StageReporter, action: Fail) -> ApplicationError:
    """The typed, content-free failure of a `Fail` decision."""
    error = action.error
    if isinstance(error, RequestCompositionError | OutputValidationError):
        # The plan that failed is the decision's request.
        error.request_id = action.request_id
    if isinstance(error, RequestCompositionError | ThreadError):
        stages.set(Stage.FAILED, error.code)
        return application_error(error)
    if isinstance(error, OutputValidationError):
        stages.set(Stage.FAILED, "output invalid")
        return application_error(error)
    if isinstance(error, SafetyError):
        stages.set(Stage.FAILED, f"reply refused by {error.policy}")
        return application_error(error)
    if isinstance(error, ConstraintError):
        stages.set(Stage.FAILED, "constraints violated")
        return application_error(error)
    stages.set(Stage.FAILED)
    # Any other decision to fail is a bug of ours: internal, naming its class only.
    return application_error(internal_error(error or RuntimeError()))


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
    return application_error(timed_out)


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
    if _committed_late(error):
        return  # the turn was published: nothing of it is left to discard
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
    """Whether the run failed because its request was refused before anything was sent.

    An invalid request (`ConfigurationError`) and a user turn input safety blocked
    (`SafetyError` of stage `input`) produced nothing: the generation id is freed with the
    rest, so a corrected request may reuse it.
    """
    if isinstance(error, ConfigurationError):
        return True
    if isinstance(error, SafetyError):
        return error.stage == "input"
    if isinstance(error, ActivityError | ApplicationError):
        cause = application_cause(error)
        if cause is None:
            return False
        if cause.type == ErrorType.SAFETY:
            return decode_details(cause.details, cause.type).stage == "input"
        return cause.type == ErrorType.CONFIGURATION
    return False


def _committed_late(error: BaseException) -> bool:
    """Whether the run failed on its time budget after its turn was committed."""
    if not isinstance(error, ActivityError | ApplicationError):
        return False
    cause = application_cause(error)
    return (
        cause is not None
        and cause.type == ErrorType.GENERATION_TIMEOUT
        and decode_details(cause.details, cause.type).code == "committed"
    )
