"""Error types shared by every layer.

All messages are content-free: they name ids, codes and sizes, never prompt, message,
summary or completion text.

```
CruxError
├── ConfigurationError (TypeError, ValueError)   the developer got something wrong
├── ThreadError(code)                            canonical conversation store failures
│   ├── ThreadCommitError                        publication outcome may be unknown
│   └── ThreadInUseError                         delete while owners are registered
├── RequestCompositionError(code)                the request cannot be planned legally
└── ProviderError(provider)                      a provider call failed
    ├── ProviderHTTPError(status_code)           non-2xx response (retry_after when given)
    │   └── ContextOverflowError                 the provider said the input is too long
    ├── ProviderTimeoutError                     the call timed out
    ├── ProviderConnectionError                  the connection failed
    └── ProviderResponseError                    malformed or unusable response
```

`CruxError`, `ConfigurationError` and `RequestCompositionError` are defined in
`planner.errors` (pure code raises them) and re-exported here.

`ApplicationError.type` strings used across the Temporal boundary are the class names and
are listed once in `ErrorType`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from planner.errors import (
    CompositionErrorCode,
    ConfigurationError,
    CruxError,
    RequestCompositionError,
)

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
]


class ErrorType(StrEnum):
    """`ApplicationError.type` values shared by activities and workflows."""

    THREAD = "ThreadError"
    THREAD_COMMIT = "ThreadCommitError"
    REQUEST_COMPOSITION = "RequestCompositionError"
    CONFIGURATION = "ConfigurationError"
    PROVIDER = "ProviderError"
    PROVIDER_HTTP = "ProviderHTTPError"
    PROVIDER_TIMEOUT = "ProviderTimeoutError"
    PROVIDER_CONNECTION = "ProviderConnectionError"
    PROVIDER_RESPONSE = "ProviderResponseError"
    CONTEXT_TOO_LONG = "ContextOverflowError"
    STORAGE_UNAVAILABLE = "StorageUnavailableError"


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
    """

    def __init__(self, message: str, *, thread_id: str | None = None):
        super().__init__("commit_failed", message, thread_id=thread_id)


class ThreadInUseError(ThreadError):
    """Deletion refused because durable owners are still registered."""

    def __init__(self, message: str, *, thread_id: str | None = None):
        super().__init__("in_use", message, thread_id=thread_id)


class ProviderError(CruxError):
    """A provider call failed.

    Attributes:
        provider: Provider family (`openai`, `anthropic`, `offline`).
        retryable: Whether a later attempt may succeed.
    """

    retryable: bool = False

    def __init__(self, provider: str, message: str):
        super().__init__(f"{provider}: {message}")
        self.provider = provider


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
    ):
        label = f" ({error_type})" if error_type else ""
        super().__init__(provider, f"HTTP {status_code}{label}")
        self.status_code = status_code
        self.retry_after = retry_after
        self.error_type = error_type
        if should_retry is not None:
            self.retryable = should_retry
        else:
            self.retryable = status_code in (408, 409, 429) or status_code >= 500


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


class ProviderTimeoutError(ProviderError):
    """The provider did not answer in time."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed."""

    retryable = True


class ProviderResponseError(ProviderError):
    """The provider's response was malformed or unusable."""

    retryable = False


class StorageUnavailableError(CruxError):
    """The canonical store could not be reached; the operation can be retried safely."""


__all__ = [
    "CompositionErrorCode",
    "ConfigurationError",
    "ContextOverflowError",
    "CruxError",
    "ErrorType",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderResponseError",
    "ProviderTimeoutError",
    "RequestCompositionError",
    "StorageUnavailableError",
    "ThreadCommitError",
    "ThreadError",
    "ThreadErrorCode",
    "ThreadInUseError",
]
