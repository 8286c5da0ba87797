"""Error types shared by every layer.

All messages are content-free: they name ids, codes and sizes, never prompt, message,
summary or completion text.

```
CruxError
├── ConfigurationError (TypeError, ValueError)   the developer got something wrong
├── ThreadError(code)                            canonical conversation store failures
│   ├── ThreadCommitError                        publication outcome may be unknown
│   │   └── PublicationInterruptedError          ... because storage became unavailable
│   └── ThreadInUseError                         delete while owners are registered
├── RequestCompositionError(code)                the request cannot be planned legally
├── GenerationFailedError(reason)                cancelled, terminated, timed out, internal
├── StorageUnavailableError                      PostgreSQL could not be reached (or was contended)
├── PreparationError(code)                       a step or invocation hook failed
├── OperatorError(code)                         retry/abandon refused: not found, wrong stage
├── SafetyError, ConstraintError, GatePolicyError, SuccessHookError, GenerationTimeoutError
│                                                the acceptance gate and the time budget
│                                                (`vocabulary.gate_errors`)
└── ProviderError(provider)                      a provider call failed
    ├── ProviderHTTPError(status_code)           non-2xx response (retry_after when given)
    │   ├── ProviderAuthError                    401/403: the key was refused
    │   ├── ProviderNotFoundError                404: unknown model or wrong base URL
    │   └── ContextOverflowError                 the provider said the input is too long
    ├── ProviderUnavailableError                 the provider could not be reached
    │   ├── ProviderTimeoutError                 the call timed out
    │   └── ProviderConnectionError              the connection failed (refused, dropped)
    └── ProviderResponseError                    malformed or unusable response

Every `ProviderError` carries `provider`, `status` (HTTP status or `None`), `retryable`,
`host` and `model` when known, and `remedy()` says what to change (the env var, the model
id, the base URL host); the provider's own body text is never kept.
```

`ApplicationError.type` strings used across the Temporal boundary are the class names and
are listed once in `ErrorType`; how each family crosses Temporal (its details, its
retryability, how it is rebuilt) is declared once in `vocabulary.failures`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

CompositionErrorCode = Literal[
    "REQUEST_TOO_LARGE",
    "REPRESENTATION_UNAVAILABLE",
    "INVALID_COMPOSITION",
]


class CruxError(Exception):
    """Root of every error raised by this project."""


class ConfigurationError(CruxError, TypeError, ValueError):
    """Invalid configuration or API usage, raised before any I/O.

    Subclasses both `TypeError` (as the seed documents specify) and `ValueError` (as Python
    users expect for bad values).

    Attributes:
        code: What kind of defect: `invalid_configuration` by default, `invalid_input` when
            a schema validation refused an input (then `fields` names where), or a specific
            refusal of an input payload (`input_missing`, `not_json`, `too_large`, ...).
        fields: The dotted schema paths of the invalid fields (list positions as `*`),
            never a value.
    """

    def __init__(
        self,
        message: str = "",
        *,
        code: str = "invalid_configuration",
        fields: Iterable[str] = (),
    ):
        super().__init__(message)
        self.code = code
        self.fields: tuple[str, ...] = tuple(fields)


class RequestCompositionError(CruxError):
    """The request cannot be composed within the model's limits with authorised losses.

    Attributes:
        code: `REQUEST_TOO_LARGE`, `REPRESENTATION_UNAVAILABLE` or `INVALID_COMPOSITION`.
        request_id: The id of the request that could not be planned.
        diagnostics: Content-free details (token figures, contributor ids, remedies).
    """

    def __init__(
        self,
        code: CompositionErrorCode,
        message: str,
        *,
        request_id: str | None = None,
        diagnostics: dict[str, object] | None = None,
    ):
        super().__init__(f"{code}: {message}")
        self.code: CompositionErrorCode = code
        self.request_id = request_id
        self.diagnostics: dict[str, object] = dict(diagnostics or {})


ThreadErrorCode = Literal[
    "invalid_message",
    "invalid_group",
    "identity_conflict",
    "not_found",
    "redacted",
    "commit_failed",
    "in_use",
    "deleted",
    "unsupported_capability",
    "abandoned",
]


class ErrorType(StrEnum):
    """`ApplicationError.type` values shared by activities and workflows."""

    THREAD = "ThreadError"
    THREAD_COMMIT = "ThreadCommitError"
    OPERATOR = "OperatorError"
    REQUEST_COMPOSITION = "RequestCompositionError"
    CONFIGURATION = "ConfigurationError"
    PROVIDER = "ProviderError"
    PROVIDER_HTTP = "ProviderHTTPError"
    PROVIDER_AUTH = "ProviderAuthError"
    PROVIDER_NOT_FOUND = "ProviderNotFoundError"
    PROVIDER_UNAVAILABLE = "ProviderUnavailableError"
    PROVIDER_TIMEOUT = "ProviderTimeoutError"
    PROVIDER_CONNECTION = "ProviderConnectionError"
    PROVIDER_RESPONSE = "ProviderResponseError"
    CONTEXT_TOO_LONG = "ContextOverflowError"
    STORAGE_UNAVAILABLE = "StorageUnavailableError"
    INTERNAL = "InternalError"
    PREPARATION = "PreparationError"
    OUTPUT_VALIDATION = "OutputValidationError"
    SAFETY = "SafetyError"
    CONSTRAINT = "ConstraintError"
    GATE_POLICY = "GatePolicyError"
    SUCCESS_HOOK = "SuccessHookError"
    GENERATION_TIMEOUT = "GenerationTimeoutError"


class ThreadError(CruxError):
    """A Thread operation failed.

    Attributes:
        code: One of the `ThreadErrorCode` values.
        thread_id: The Thread the operation addressed, when known.
    """

    def __init__(self, code: ThreadErrorCode, message: str, *, thread_id: str | None = None):
        super().__init__(f"{code}: {message}")
        self.code: ThreadErrorCode = code
        self.thread_id = thread_id


class ThreadCommitError(ThreadError):
    """Publication failed and visible history may or may not contain the commit.

    Repeating the same call with the same ids repairs: it either replays the stored receipt
    or publishes.

    Attributes:
        stage: For `abandoned`, the stage the run was waiting in when it was given up.
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str | None = None,
        code: ThreadErrorCode = "commit_failed",
        stage: str | None = None,
    ):
        # `abandoned`: an operator gave the staged turn up; nothing was published.
        super().__init__(code, message, thread_id=thread_id)
        self.stage = stage


class OperatorError(CruxError):
    """An operator command could not be carried out on a generation run.

    Attributes:
        code: `not_found` (no such run) or `wrong_stage` (the run is not waiting for
            storage or for its commit, so there is nothing to retry or abandon).
        stage: The run's stage when the command was refused, when known.
    """

    def __init__(self, code: OperatorErrorCode, message: str, *, stage: str | None = None):
        super().__init__(f"{code}: {message}")
        self.code: OperatorErrorCode = code
        self.stage = stage


OperatorErrorCode = Literal["not_found", "wrong_stage"]


class ThreadInUseError(ThreadError):
    """Deletion refused because durable owners are still registered."""

    def __init__(self, message: str, *, thread_id: str | None = None):
        super().__init__("in_use", message, thread_id=thread_id)


_ENV_PREFIX = {"openai": "OPENAI", "anthropic": "ANTHROPIC"}


class ProviderError(CruxError):
    """A provider call failed.

    Attributes:
        provider: Provider family (`openai`, `anthropic`, `offline`).
        retryable: Whether a later attempt may succeed.
        status: The HTTP status, when the provider answered.
        host: The provider's host (`host:port`), when known.
        model: The `provider:model` id of the call, when known.
    """

    retryable: bool = False

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        host: str | None = None,
        model: str | None = None,
    ):
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.detail = message
        self.host = host
        self.model = model

    @property
    def status(self) -> int | None:
        """The HTTP status, `None` when no response arrived."""
        return None

    def env_var(self, suffix: str) -> str:
        """The worker setting to change, for example `OPENAI_BASE_URL`."""
        return f"{_ENV_PREFIX.get(self.provider, self.provider.upper())}_{suffix}"

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        return f"check the worker's {self.env_var('BASE_URL')} and the provider's status"

    def explain(self) -> str:
        """A content-free message: what failed, where, for which model, and the remedy."""
        where = f" from {self.host}" if self.host else ""
        model = f" for model {self.model}" if self.model else ""
        return f"{self.provider}: {self.detail}{where}{model}; {self.remedy()}"


class ProviderHTTPError(ProviderError):
    """The provider answered with a non-success HTTP status.

    Attributes:
        status_code: The HTTP status.
        retry_after: Seconds the provider asked us to wait, if it said.
        error_type: The provider's machine-readable error type or code, if any.
    """

    def __init__(
        self,
        provider: str,
        status_code: int,
        *,
        retry_after: float | None = None,
        error_type: str | None = None,
        should_retry: bool | None = None,
        host: str | None = None,
        model: str | None = None,
    ):
        label = f" ({error_type})" if error_type else ""
        super().__init__(provider, f"HTTP {status_code}{label}", host=host, model=model)
        self.status_code = status_code
        self.retry_after = retry_after
        self.error_type = error_type
        if should_retry is not None:
            self.retryable = should_retry
        else:
            self.retryable = status_code in (408, 409, 429) or status_code >= 500

    @property
    def status(self) -> int | None:
        """The HTTP status."""
        return self.status_code

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        if self.retryable:
            return "the provider is busy or failing; the call is retried"
        return f"check the request settings for model {self.model or 'in use'}"


class ProviderAuthError(ProviderHTTPError):
    """The provider refused the credentials (HTTP 401 or 403)."""

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        return (
            f"set a valid {self.env_var('API_KEY')} on the worker "
            f"(and check {self.env_var('BASE_URL')} points at the right host)"
        )


class ProviderNotFoundError(ProviderHTTPError):
    """The provider does not know the model or the endpoint (HTTP 404)."""

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        model = f"the model id {self.model}" if self.model else "the model id"
        return f"check {model} and the worker's {self.env_var('BASE_URL')}"


def http_error(
    provider: str,
    status_code: int,
    *,
    retry_after: float | None = None,
    error_type: str | None = None,
    should_retry: bool | None = None,
) -> ProviderHTTPError:
    """The `ProviderHTTPError` subclass for a status (401/403 auth, 404 not found)."""
    kind = ProviderHTTPError
    if status_code in (401, 403):
        kind = ProviderAuthError
    elif status_code == 404:
        kind = ProviderNotFoundError
    return kind(
        provider,
        status_code,
        retry_after=retry_after,
        error_type=error_type,
        should_retry=False if kind is not ProviderHTTPError else should_retry,
    )


class ContextOverflowError(ProviderHTTPError):
    """The provider rejected the request because the input exceeds the model's context.

    Attributes:
        requested_tokens: The input size the provider measured, when its message stated it.
        limit_tokens: The limit the provider applied, when its message stated it.
    """

    def __init__(
        self,
        provider: str,
        status_code: int,
        *,
        error_type: str | None = None,
        requested_tokens: int | None = None,
        limit_tokens: int | None = None,
    ):
        super().__init__(provider, status_code, error_type=error_type, should_retry=False)
        self.requested_tokens = requested_tokens
        self.limit_tokens = limit_tokens

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        return "lower input_budget.max or check the model's context window in the catalog"


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached (refused, dropped or timed out)."""

    retryable = True

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        return (
            f"check that the server at the worker's {self.env_var('BASE_URL')} is running "
            "and reachable"
        )


class ProviderTimeoutError(ProviderUnavailableError):
    """The provider did not answer in time."""


class ProviderConnectionError(ProviderUnavailableError):
    """The connection to the provider failed."""


class ProviderResponseError(ProviderError):
    """The provider's response was malformed or unusable."""

    retryable = False

    def remedy(self) -> str:
        """What the operator can change so that the call succeeds."""
        return f"check that {self.env_var('BASE_URL')} serves the provider's wire format"


class StorageUnavailableError(CruxError):
    """The canonical store could not be reached; the operation can be retried safely.

    Raised by the stores for connection failures, server shutdowns, exhausted resources and
    contention (serialisation failures, deadlocks, lock timeouts), with the driver's error as
    `__cause__`; and by a run whose storage wait outlasted its `storage_wait_seconds`.

    Attributes:
        stage: The run's stage that waited for storage, when a run gave up waiting.
    """

    def __init__(self, message: str = "storage unavailable", *, stage: str | None = None):
        super().__init__(message)
        self.stage = stage


class PublicationInterruptedError(StorageUnavailableError, ThreadCommitError):
    """Storage became unavailable during a publication: its outcome is unknown.

    Both a `ThreadCommitError` (repeat the same call to repair) and a
    `StorageUnavailableError` (waiting for storage is what helps); it crosses Temporal as the
    latter.
    """

    def __init__(self, message: str, *, thread_id: str | None = None):
        ThreadCommitError.__init__(self, message, thread_id=thread_id)


class GenerationFailedError(CruxError):
    """A generation ended without a typed domain failure.

    It was cancelled, terminated or timed out, or failed internally; `reason` names which,
    never content.

    Attributes:
        reason: `cancelled`, `terminated`, `timed_out` or `internal`.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason


class NoWorkerError(GenerationFailedError):
    """No worker polls the task queue a run was started on; the run was stopped.

    Raised by the caller's runtime within seconds of the start (see `Runtime.generate`),
    instead of waiting for a worker that is not there. The run never began: it is
    terminated, so a worker started later does not answer a call nobody waits for.

    Attributes:
        reason: `no_worker`.
        task_queue: The task queue nobody polls.
    """

    def __init__(self, task_queue: str, message: str):
        super().__init__("no_worker", message)
        self.task_queue = task_queue


class CallTimeoutError(GenerationFailedError, TimeoutError):
    """A call did not finish within the caller's `timeout=`; its run was asked to cancel.

    The caller's wait, not the run's own time budget (that is `GenerationTimeoutError`).

    Attributes:
        reason: `timed_out`.
        workflow_id: The run's workflow id (`crux generation show <id>` tells how it ended:
            a reply committed before the cancellation arrived stays committed).
        timeout: The caller's timeout, in seconds.
    """

    def __init__(self, workflow_id: str, timeout: float, message: str):
        super().__init__("timed_out", message)
        self.workflow_id = workflow_id
        self.timeout = timeout


class PreparationError(CruxError):
    """A registered `prepare_step` or `prepare_invocation` hook failed; nothing was sent.

    Attributes:
        code: `hook_failed` (the hook raised) or `hook_not_registered` (no hook of that
            name on the worker).
    """

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


class OutputValidationError(CruxError):
    """Every reply of a structured-output generation failed validation; nothing was committed.

    Attributes:
        defects: Where the last rejected reply failed, as `path: kind` (for example
            `$.items[0].price: type`); never the reply's values.
        attempts: Provider calls whose replies were rejected.
        request_id: The last rejected request.
    """

    def __init__(
        self,
        defects: tuple[str, ...],
        *,
        attempts: int = 0,
        request_id: str | None = None,
    ):
        shown = ", ".join(defects[:4]) + (", ..." if len(defects) > 4 else "")
        super().__init__(f"the reply failed output validation {attempts} time(s): {shown}")
        self.defects = defects
        self.attempts = attempts
        self.request_id = request_id


__all__ = [
    "CompositionErrorCode",
    "ConfigurationError",
    "ContextOverflowError",
    "CruxError",
    "ErrorType",
    "GenerationFailedError",
    "CallTimeoutError",
    "NoWorkerError",
    "OutputValidationError",
    "PreparationError",
    "ProviderAuthError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderNotFoundError",
    "ProviderResponseError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "PublicationInterruptedError",
    "RequestCompositionError",
    "StorageUnavailableError",
    "ThreadCommitError",
    "ThreadError",
    "ThreadErrorCode",
    "ThreadInUseError",
    "http_error",
]
