"""The failure registry: one declaration per `ErrorType`, and every family round-trips.

A domain error becomes an `ApplicationError`, goes through Temporal's default failure
converter (what a workflow history and any SDK's client see), and is rebuilt with the same
type, code, details and retryability.
"""

from __future__ import annotations

import asyncio
import inspect
import json

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from contracts.failures import application_error, rebuilt, rebuilt_from
from vocabulary import errors, gate_errors
from vocabulary.details import ErrorDetails, decode_details
from vocabulary.errors import (
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    ErrorType,
    GenerationFailedError,
    OperatorError,
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
    PublicationInterruptedError,
    RequestCompositionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
    ThreadInUseError,
)
from vocabulary.failures import (
    CAUSE_FIELDS,
    FAMILIES,
    failure_cause,
    family_of,
    is_provider_failure,
    rebuilt_cause,
)
from vocabulary.gate_errors import (
    ConstraintError,
    GatePolicyError,
    GenerationTimeoutError,
    SafetyError,
    SuccessHookError,
)


def _provider(error: ProviderError) -> ProviderError:
    error.host = "127.0.0.1:9"
    error.model = "openai:gpt-x"
    return error


# One error of each family, with every detail its family carries filled in.
SAMPLES: dict[ErrorType, CruxError] = {
    ErrorType.THREAD: ThreadError("identity_conflict", "moved"),
    ErrorType.THREAD_COMMIT: ThreadCommitError("repeat", code="abandoned", stage="committing"),
    ErrorType.OPERATOR: OperatorError("wrong_stage", "not waiting", stage="invoking"),
    ErrorType.REQUEST_COMPOSITION: RequestCompositionError(
        "REQUEST_TOO_LARGE", "no fit", request_id="request_1", diagnostics={"limit": 5}
    ),
    ErrorType.CONFIGURATION: ConfigurationError(
        "invalid generation input: model (missing)", code="invalid_input", fields=["model"]
    ),
    ErrorType.PROVIDER: _provider(ProviderError("openai", "failed")),
    ErrorType.PROVIDER_HTTP: _provider(
        ProviderHTTPError("openai", 429, retry_after=1.5, error_type="rate_limit_error")
    ),
    ErrorType.PROVIDER_AUTH: _provider(ProviderAuthError("openai", 401, should_retry=False)),
    ErrorType.PROVIDER_NOT_FOUND: _provider(
        ProviderNotFoundError("openai", 404, should_retry=False)
    ),
    ErrorType.PROVIDER_UNAVAILABLE: _provider(ProviderUnavailableError("openai", "down")),
    ErrorType.PROVIDER_TIMEOUT: _provider(ProviderTimeoutError("openai", "timed out")),
    ErrorType.PROVIDER_CONNECTION: _provider(ProviderConnectionError("openai", "refused")),
    ErrorType.PROVIDER_RESPONSE: _provider(ProviderResponseError("openai", "bad json")),
    ErrorType.CONTEXT_TOO_LONG: _provider(
        ContextOverflowError("openai", 400, error_type="context_length_exceeded")
    ),
    ErrorType.STORAGE_UNAVAILABLE: StorageUnavailableError("waited", stage="committing"),
    ErrorType.INTERNAL: GenerationFailedError("internal", "internal error (RuntimeError)"),
    ErrorType.PREPARATION: PreparationError("hook_not_registered", "no hook"),
    ErrorType.OUTPUT_VALIDATION: OutputValidationError(
        ("$.price: type",), attempts=2, request_id="request_2"
    ),
    ErrorType.SAFETY: SafetyError(
        "no-secrets", "deny_list.match", stage="output", attempts=3, request_id="request_3"
    ),
    ErrorType.CONSTRAINT: ConstraintError(
        ("0:length.too_long", "1:required.missing"), attempts=2, request_id="request_4"
    ),
    ErrorType.GATE_POLICY: GatePolicyError("tone", "raised", error_type="KeyError"),
    ErrorType.SUCCESS_HOOK: SuccessHookError("notify", "raised", error_type="OSError"),
    ErrorType.GENERATION_TIMEOUT: GenerationTimeoutError(
        committed=True, budget_seconds=2.5, stage="committing"
    ),
}


def test_every_error_type_is_declared_once_and_every_declaration_is_an_error_type() -> None:
    assert set(FAMILIES) == set(ErrorType)
    assert set(SAMPLES) == set(ErrorType)


def test_the_type_string_is_the_domain_class_name() -> None:
    for error_type, family in FAMILIES.items():
        if error_type is ErrorType.INTERNAL:
            # A generation that failed without a typed domain failure (wire name kept).
            assert family.error is GenerationFailedError
            continue
        assert error_type.value == family.error.__name__


def test_every_public_error_class_has_a_family() -> None:
    classes = [
        value
        for module in (errors, gate_errors)
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, CruxError) and value is not CruxError
    ]
    assert classes
    for kind in classes:
        assert any(issubclass(kind, family.error) for family in FAMILIES.values()), kind


def _through_temporal(error: ApplicationError) -> ApplicationError:
    """What a client decodes of `error` after Temporal's default failure converter.

    The details travel as one `json/plain` payload holding a JSON object: what a client of
    any language reads with its SDK's default converter.
    """
    converter = DataConverter.default
    failure = Failure()

    async def round_trip() -> BaseException:
        await converter.encode_failure(error, failure)
        return await converter.decode_failure(failure)

    decoded = asyncio.run(round_trip())
    (payload,) = failure.application_failure_info.details.payloads
    assert payload.metadata["encoding"] == b"json/plain"
    assert isinstance(json.loads(payload.data), dict)
    assert isinstance(decoded, ApplicationError)
    return decoded


@pytest.mark.parametrize("error_type", list(ErrorType), ids=lambda kind: kind.value)
def test_every_family_round_trips_through_temporal(error_type: ErrorType) -> None:
    error = SAMPLES[error_type]
    family = family_of(error)
    assert family is not None and family.type is error_type
    sent = application_error(error)
    assert sent.type == error_type.value
    assert sent.non_retryable is (not family.retryable(error))
    # One detail, a plain JSON object any SDK's default converter decodes.
    assert len(sent.details) == 1
    assert json.loads(json.dumps(sent.details[0])) == sent.details[0]

    received = _through_temporal(sent)
    back = rebuilt(received)
    assert back is not None
    assert type(back) is type(error)
    assert family.details(back) == family.details(error)
    assert family.retryable(back) is family.retryable(error)
    assert getattr(back, "code", None) == getattr(error, "code", None)
    assert decode_details(received.details, received.type) == family.details(error)


def test_a_retry_delay_travels_as_next_retry_delay() -> None:
    sent = application_error(SAMPLES[ErrorType.PROVIDER_HTTP])
    assert sent.next_retry_delay is not None and sent.next_retry_delay.total_seconds() == 1.5


def test_subclasses_travel_as_their_family() -> None:
    in_use = application_error(ThreadInUseError("owners left"))
    assert (in_use.type, decode_details(in_use.details).code) == ("ThreadError", "in_use")
    back = rebuilt(in_use)
    assert isinstance(back, ThreadInUseError)

    interrupted = application_error(PublicationInterruptedError("repeat", thread_id="t"))
    assert interrupted.type == ErrorType.STORAGE_UNAVAILABLE
    assert not interrupted.non_retryable


def test_configuration_errors_carry_code_and_field_paths() -> None:
    sent = application_error(SAMPLES[ErrorType.CONFIGURATION])
    assert sent.details[0] == {"crux_details": 1, "code": "invalid_input", "fields": ["model"]}


def test_an_undeclared_error_travels_as_internal_naming_only_its_class() -> None:
    sent = application_error(CruxError("secret text"))
    assert sent.type == ErrorType.INTERNAL and sent.non_retryable
    assert "secret" not in sent.message


def test_an_undeclared_type_is_rebuilt_as_an_internal_failure() -> None:
    assert rebuilt(ApplicationError("x", type="SomethingElse")) is None
    rebuilt_error = rebuilt_from("SomethingElse", "x", ErrorDetails(), non_retryable=True)
    assert isinstance(rebuilt_error, GenerationFailedError)
    assert rebuilt_error.reason == "internal"


@pytest.mark.parametrize(
    "error_type",
    [kind for kind in ErrorType if isinstance(SAMPLES[kind], ProviderError)],
    ids=lambda kind: kind.value,
)
def test_a_provider_failure_travels_as_the_cause_of_a_composition_error(
    error_type: ErrorType,
) -> None:
    provider_error = SAMPLES[error_type]
    family = family_of(provider_error)
    assert family is not None and is_provider_failure(error_type)
    cause = failure_cause(error_type, family.details(provider_error))
    assert cause["type"] == error_type.value
    assert set(cause) <= {"type", *CAUSE_FIELDS}
    error = RequestCompositionError(
        "REPRESENTATION_UNAVAILABLE", "no summary", diagnostics={"cause": cause}
    )
    back = rebuilt(_through_temporal(application_error(error)))
    assert isinstance(back, RequestCompositionError)
    assert back.diagnostics["cause"] == cause
    rebuilt_cause = back.__cause__
    assert type(rebuilt_cause) is type(provider_error)
    assert family.details(rebuilt_cause) == family.details(provider_error)  # type: ignore[arg-type]


def test_a_composition_error_without_a_cause_has_none() -> None:
    back = rebuilt(application_error(SAMPLES[ErrorType.REQUEST_COMPOSITION]))
    assert back is not None and back.__cause__ is None
    assert not is_provider_failure("StorageUnavailableError") and not is_provider_failure(None)
    assert rebuilt_cause({"cause": {"type": "SomethingElse"}}) is None
    assert rebuilt_cause({"cause": "not a record"}) is None


def test_gate_errors_keep_their_facts_across_temporal() -> None:
    safety = rebuilt(_through_temporal(application_error(SAMPLES[ErrorType.SAFETY])))
    assert isinstance(safety, SafetyError)
    assert (safety.policy, safety.reason_code, safety.stage, safety.attempts) == (
        "no-secrets",
        "deny_list.match",
        "output",
        3,
    )
    timeout = rebuilt(_through_temporal(application_error(SAMPLES[ErrorType.GENERATION_TIMEOUT])))
    assert isinstance(timeout, GenerationTimeoutError)
    assert timeout.committed is True and timeout.budget_seconds == 2.5
    assert "committed" in str(timeout) and "generation_id" in str(timeout)
    constraint = rebuilt(_through_temporal(application_error(SAMPLES[ErrorType.CONSTRAINT])))
    assert isinstance(constraint, ConstraintError)
    assert constraint.violations == ("0:length.too_long", "1:required.missing")
