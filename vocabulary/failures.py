"""The failure registry: how each error family crosses Temporal, declared once.

A family is one `ErrorType` (the `ApplicationError.type`, always the domain class name; the
strings are wire contract and never change) and says:

- which domain class it stands for (the most specific registered class in an error's MRO
  wins, so `ThreadInUseError` travels as `ThreadError` and `PublicationInterruptedError` as
  `StorageUnavailableError`);
- its structured details (`ErrorDetails`: code, field paths, request id, diagnostics,
  provider, status, host, model, stage), the only detail of the `ApplicationError`, so a
  client in any language reads them as one JSON object;
- whether a later attempt may succeed (`ApplicationError.non_retryable` is its negation);
- how a client rebuilds the typed error from the message, the details and the retry flag.

Every direction uses this table: activities (`activities._errors`), workflow code and the
facade (`contracts.failures`), and parallel members (their recorded failures are rebuilt the
same way). Adding an error type is one `ErrorType` member and one declaration below; the
registry tests check that the two lists match and that every family round-trips.

This module is the vocabulary half and imports nothing of Temporal; `contracts.failures`
turns a family into an `ApplicationError` and back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from vocabulary.details import ErrorDetails
from vocabulary.errors import (
    CompositionErrorCode,
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    ErrorType,
    GenerationFailedError,
    OperatorError,
    OperatorErrorCode,
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
    ThreadErrorCode,
    ThreadInUseError,
)
from vocabulary.gate_errors import (
    ConstraintError,
    GatePolicyError,
    GatePolicyErrorCode,
    GateStage,
    GenerationTimeoutError,
    SafetyError,
    SuccessHookError,
    SuccessHookErrorCode,
)

_E = TypeVar("_E", bound=CruxError)

Rebuild = Callable[[str, ErrorDetails, bool], _E]
"""`(message, details, retryable) -> error`: the typed error a client raises."""


@dataclass(frozen=True)
class Family(Generic[_E]):
    """How one error family crosses Temporal.

    Attributes:
        type: The `ApplicationError.type` (the domain class name).
        error: The domain class.
        details: The error's structured, content-free details.
        retryable: Whether a later attempt may succeed.
        rebuild: The typed error from `(message, details, retryable)`.
        message: The `ApplicationError` message (ids, codes and figures only).
        retry_delay: Seconds the next attempt should wait, when the error says.
    """

    type: ErrorType
    error: type[_E]
    details: Callable[[_E], ErrorDetails]
    retryable: Callable[[_E], bool]
    rebuild: Rebuild[_E]
    message: Callable[[_E], str] = str
    retry_delay: Callable[[_E], float | None] = lambda _error: None


def _never(_error: CruxError) -> bool:
    return False


def _always(_error: CruxError) -> bool:
    return True


def _unprefixed(message: str, code: str | None) -> str:
    """The message without the `code: ` prefix its class adds again."""
    return message.removeprefix(f"{code}: ") if code else message


# Contention and unknown outcomes are worth retrying: a repeat of the same call repairs.
_RETRYABLE_THREAD_CODES = frozenset({"commit_failed"})


def _thread_retryable(error: ThreadError) -> bool:
    return error.code in _RETRYABLE_THREAD_CODES


def _thread(message: str, details: ErrorDetails, _retryable: bool) -> ThreadError:
    code = cast(ThreadErrorCode, details.code or "commit_failed")
    text = _unprefixed(message, code)
    if code == "in_use":
        return ThreadInUseError(text)
    return ThreadError(code, text)


def _thread_commit(message: str, details: ErrorDetails, _retryable: bool) -> ThreadCommitError:
    code = cast(ThreadErrorCode, details.code or "commit_failed")
    return ThreadCommitError(_unprefixed(message, code), code=code, stage=details.stage)


def _composition(message: str, details: ErrorDetails, _retryable: bool) -> RequestCompositionError:
    code = cast(CompositionErrorCode, details.code or "INVALID_COMPOSITION")
    error = RequestCompositionError(
        code,
        _unprefixed(message, code),
        request_id=details.request_id,
        diagnostics=details.diagnostics,
    )
    # A summary that could not be prepared names the failure behind it: rebuilt typed.
    error.__cause__ = rebuilt_cause(details.diagnostics)
    return error


def _output_details(error: OutputValidationError) -> ErrorDetails:
    return ErrorDetails(
        code="output_invalid",
        request_id=error.request_id,
        diagnostics={"defects": list(error.defects), "attempts": error.attempts},
    )


def _output(message: str, details: ErrorDetails, _retryable: bool) -> OutputValidationError:
    defects: object = details.diagnostics.get("defects", [])
    attempts: object = details.diagnostics.get("attempts", 0)
    listed: list[object] = list(defects) if isinstance(defects, list) else []  # pyright: ignore[reportUnknownArgumentType]
    return OutputValidationError(
        tuple(str(defect) for defect in listed),
        attempts=attempts if isinstance(attempts, int) else 0,
        request_id=details.request_id,
    )


def _provider_details(error: ProviderError) -> ErrorDetails:
    return ErrorDetails(
        # The provider's error type (`rate_limit_error`, `overloaded_error`, ...) is an
        # identifier the classifier vetted, never its message text.
        code=error.error_type if isinstance(error, ProviderHTTPError) else None,
        provider=error.provider,
        status=error.status,
        host=error.host,
        model=error.model,
    )


def _provider_delay(error: ProviderError) -> float | None:
    if isinstance(error, ProviderHTTPError) and error.retry_after is not None:
        return error.retry_after if error.retry_after >= 0 else None
    return None


def _provider(kind: type[ProviderError]) -> Rebuild[ProviderError]:
    """Rebuild a provider error of `kind` from its details (provider, status, host, model)."""

    def rebuild(message: str, details: ErrorDetails, retryable: bool) -> ProviderError:
        provider = details.provider or "provider"
        status = details.status
        if kind is ContextOverflowError:
            error: ProviderError = ContextOverflowError(
                provider, status if status is not None else 400, error_type=details.code
            )
        elif issubclass(kind, ProviderHTTPError):
            error = kind(
                provider,
                status if status is not None else 0,
                error_type=details.code,
                should_retry=retryable,
            )
        else:
            error = kind(provider, "call failed")
        error.host = details.host
        error.model = details.model
        error.retryable = retryable
        # The message the worker composed (it names the remedy) is kept as is.
        error.args = (message,)
        return error

    return rebuild


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _safety(message: str, details: ErrorDetails, _retryable: bool) -> SafetyError:
    stage: GateStage = "output" if details.stage == "output" else "input"
    return SafetyError(
        _text(details.diagnostics.get("policy")) or "policy",
        details.code,
        stage=stage,
        attempts=_count(details.diagnostics.get("attempts")),
        request_id=details.request_id,
    )


def _constraint(message: str, details: ErrorDetails, _retryable: bool) -> ConstraintError:
    listed: object = details.diagnostics.get("violations", [])
    violations = [str(v) for v in listed] if isinstance(listed, list) else []  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return ConstraintError(
        tuple(violations),
        attempts=_count(details.diagnostics.get("attempts")),
        request_id=details.request_id,
    )


def _timeout(message: str, details: ErrorDetails, _retryable: bool) -> GenerationTimeoutError:
    budget: object = details.diagnostics.get("budget_seconds", 0)
    return GenerationTimeoutError(
        committed=details.diagnostics.get("committed") is True,
        budget_seconds=float(budget) if isinstance(budget, int | float) else 0.0,
        stage=details.stage,
    )


def _declare(
    error_type: ErrorType,
    error: type[_E],
    *,
    details: Callable[[_E], ErrorDetails],
    rebuild: Rebuild[_E],
    retryable: Callable[[_E], bool] = _never,
    message: Callable[[_E], str] = str,
    retry_delay: Callable[[_E], float | None] = lambda _error: None,
) -> tuple[ErrorType, Family[CruxError]]:
    family = Family(error_type, error, details, retryable, rebuild, message, retry_delay)
    return error_type, cast(Family[CruxError], family)


def _provider_family(
    error_type: ErrorType, kind: type[ProviderError]
) -> tuple[ErrorType, Family[CruxError]]:
    return _declare(
        error_type,
        kind,
        details=_provider_details,
        retryable=lambda error: error.retryable,
        rebuild=_provider(kind),
        # `explain()` names the remedy and never the provider's body text.
        message=lambda error: error.explain(),
        retry_delay=_provider_delay,
    )


FAMILIES: Mapping[ErrorType, Family[CruxError]] = dict(
    [
        _declare(
            ErrorType.THREAD,
            ThreadError,
            details=lambda error: ErrorDetails(code=error.code),
            retryable=_thread_retryable,
            rebuild=_thread,
        ),
        _declare(
            ErrorType.THREAD_COMMIT,
            ThreadCommitError,
            details=lambda error: ErrorDetails(code=error.code, stage=error.stage),
            # A repeat of the same call repairs, unless an operator gave the turn up.
            retryable=_thread_retryable,
            rebuild=_thread_commit,
        ),
        _declare(
            ErrorType.OPERATOR,
            OperatorError,
            details=lambda error: ErrorDetails(code=error.code, stage=error.stage),
            rebuild=lambda message, details, _retryable: OperatorError(
                cast(OperatorErrorCode, details.code or "wrong_stage"),
                _unprefixed(message, details.code),
                stage=details.stage,
            ),
        ),
        _declare(
            ErrorType.REQUEST_COMPOSITION,
            RequestCompositionError,
            details=lambda error: ErrorDetails(
                code=error.code, request_id=error.request_id, diagnostics=error.diagnostics
            ),
            rebuild=_composition,
        ),
        _declare(
            ErrorType.CONFIGURATION,
            ConfigurationError,
            details=lambda error: ErrorDetails(code=error.code, fields=error.fields),
            rebuild=lambda message, details, _retryable: ConfigurationError(
                message, code=details.code or "invalid_configuration", fields=details.fields
            ),
        ),
        _provider_family(ErrorType.PROVIDER, ProviderError),
        _provider_family(ErrorType.PROVIDER_HTTP, ProviderHTTPError),
        _provider_family(ErrorType.PROVIDER_AUTH, ProviderAuthError),
        _provider_family(ErrorType.PROVIDER_NOT_FOUND, ProviderNotFoundError),
        _provider_family(ErrorType.PROVIDER_UNAVAILABLE, ProviderUnavailableError),
        _provider_family(ErrorType.PROVIDER_TIMEOUT, ProviderTimeoutError),
        _provider_family(ErrorType.PROVIDER_CONNECTION, ProviderConnectionError),
        _provider_family(ErrorType.PROVIDER_RESPONSE, ProviderResponseError),
        _provider_family(ErrorType.CONTEXT_TOO_LONG, ContextOverflowError),
        _declare(
            ErrorType.STORAGE_UNAVAILABLE,
            StorageUnavailableError,
            details=lambda error: ErrorDetails(stage=error.stage),
            # The same statement can succeed once the outage or the contention is over.
            retryable=_always,
            rebuild=lambda message, details, _retryable: StorageUnavailableError(
                message, stage=details.stage
            ),
        ),
        _declare(
            ErrorType.INTERNAL,
            GenerationFailedError,
            details=lambda error: ErrorDetails(code=error.reason),
            rebuild=lambda message, details, _retryable: GenerationFailedError(
                details.code or "internal", _unprefixed(message, details.code or "internal")
            ),
        ),
        _declare(
            ErrorType.PREPARATION,
            PreparationError,
            details=lambda error: ErrorDetails(code=error.code),
            # A hook is user code: one that raised would most likely raise again.
            rebuild=lambda message, details, _retryable: PreparationError(
                details.code or "hook_failed", _unprefixed(message, details.code)
            ),
        ),
        _declare(
            ErrorType.OUTPUT_VALIDATION,
            OutputValidationError,
            details=_output_details,
            rebuild=_output,
        ),
        _declare(
            ErrorType.SAFETY,
            SafetyError,
            details=lambda error: ErrorDetails(
                code=error.reason_code,
                request_id=error.request_id,
                stage=error.stage,
                diagnostics={"policy": error.policy, "attempts": error.attempts},
            ),
            rebuild=_safety,
        ),
        _declare(
            ErrorType.CONSTRAINT,
            ConstraintError,
            details=lambda error: ErrorDetails(
                code="constraints_violated",
                request_id=error.request_id,
                diagnostics={"violations": list(error.violations), "attempts": error.attempts},
            ),
            rebuild=_constraint,
        ),
        _declare(
            ErrorType.GATE_POLICY,
            GatePolicyError,
            details=lambda error: ErrorDetails(
                code=error.code,
                diagnostics={"policy": error.policy}
                | ({"error_type": error.error_type} if error.error_type else {}),
            ),
            # A policy is user code: one that raised would most likely raise again.
            rebuild=lambda message, details, _retryable: GatePolicyError(
                _text(details.diagnostics.get("policy")) or "policy",
                cast(GatePolicyErrorCode, details.code or "raised"),
                error_type=_text(details.diagnostics.get("error_type")),
            ),
        ),
        _declare(
            ErrorType.SUCCESS_HOOK,
            SuccessHookError,
            details=lambda error: ErrorDetails(
                code=error.code,
                diagnostics={"hook": error.hook}
                | ({"error_type": error.error_type} if error.error_type else {}),
            ),
            # A hook that raised is retried within its bounded policy (it may call a
            # service that recovers); one that is not registered here never will run.
            retryable=lambda error: error.code == "raised",
            rebuild=lambda message, details, _retryable: SuccessHookError(
                _text(details.diagnostics.get("hook")) or "hook",
                cast(SuccessHookErrorCode, details.code or "raised"),
                error_type=_text(details.diagnostics.get("error_type")),
            ),
        ),
        _declare(
            ErrorType.GENERATION_TIMEOUT,
            GenerationTimeoutError,
            details=lambda error: ErrorDetails(
                code="committed" if error.committed else "not_committed",
                stage=error.stage,
                diagnostics={
                    "committed": error.committed,
                    "budget_seconds": error.budget_seconds,
                },
            ),
            rebuild=_timeout,
        ),
    ]
)
"""Every error family by its `ApplicationError.type`."""

_BY_CLASS: Mapping[type[CruxError], Family[CruxError]] = {
    family.error: family for family in FAMILIES.values()
}


def family_of(error: BaseException) -> Family[CruxError] | None:
    """The family of `error`: its most specific registered class, `None` for none."""
    for kind in type(error).__mro__:
        family = _BY_CLASS.get(cast(Any, kind))
        if family is not None:
            return family
    return None


def rebuild(
    error_type: str | None, message: str, details: ErrorDetails, *, retryable: bool
) -> CruxError | None:
    """The typed error of a failure of `error_type`, `None` for a type nobody declared."""
    family = FAMILIES.get(cast(ErrorType, error_type)) if error_type else None
    if family is None:
        return None
    return family.rebuild(message, details, retryable)


CAUSE_FIELDS = ("code", "provider", "status", "host", "model")
"""The details of a cause kept in `diagnostics["cause"]` (content-free, like all details)."""


def is_provider_failure(error_type: str | None) -> bool:
    """Whether a failure of `error_type` is a provider call's (any `ProviderError`)."""
    family = FAMILIES.get(cast(ErrorType, error_type)) if error_type else None
    return family is not None and issubclass(family.error, ProviderError)


def failure_cause(error_type: str, details: ErrorDetails) -> dict[str, object]:
    """The content-free record of a failure that caused another one.

    Carried in `diagnostics["cause"]` of the error it caused: the failure's type (its
    `ApplicationError.type`) and its details' code, provider, HTTP status, host and model.
    """
    fields = details.model_dump(mode="json", include=set(CAUSE_FIELDS), exclude_none=True)
    return {"type": error_type, **fields}


def rebuilt_cause(diagnostics: Mapping[str, object]) -> CruxError | None:
    """The typed error a `diagnostics["cause"]` record describes, `None` without one."""
    raw = diagnostics.get("cause")
    if not isinstance(raw, Mapping):
        return None
    cause = cast(Mapping[str, object], raw)
    error_type = cause.get("type")
    family = FAMILIES.get(cast(ErrorType, error_type)) if isinstance(error_type, str) else None
    if family is None:
        return None
    try:
        details = ErrorDetails.model_validate({k: cause[k] for k in CAUSE_FIELDS if k in cause})
    except ValueError:
        return None
    error = family.rebuild("the failure that caused this one", details, False)
    if isinstance(error, ProviderError):
        # What failed, where, for which model: rebuilt from the details, never quoted.
        error.args = (error.explain(),)
    return error


__all__ = [
    "CAUSE_FIELDS",
    "FAMILIES",
    "Family",
    "failure_cause",
    "family_of",
    "is_provider_failure",
    "rebuild",
    "rebuilt_cause",
]
