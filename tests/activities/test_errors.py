"""The one error-mapping function: domain error -> Temporal ApplicationError."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from activities import to_application_error
from crux.errors import (
    ConfigurationError,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderResponseError,
    ProviderTimeoutError,
    RequestCompositionError,
    ThreadCommitError,
    ThreadError,
)


@pytest.mark.parametrize(
    ("error", "expected_type", "retryable"),
    [
        (ProviderHTTPError("openai", 429), "ProviderHTTPError", True),
        (ProviderHTTPError("openai", 408), "ProviderHTTPError", True),
        (ProviderHTTPError("openai", 409), "ProviderHTTPError", True),
        (ProviderHTTPError("openai", 500), "ProviderHTTPError", True),
        (ProviderHTTPError("anthropic", 529), "ProviderHTTPError", True),
        (ProviderHTTPError("openai", 400), "ProviderHTTPError", False),
        (ProviderHTTPError("openai", 401), "ProviderHTTPError", False),
        (ProviderHTTPError("openai", 404), "ProviderHTTPError", False),
        (ContextOverflowError("openai", 400), "ContextOverflowError", False),
        (ProviderTimeoutError("openai", "timed out"), "ProviderTimeoutError", True),
        (ProviderConnectionError("openai", "refused"), "ProviderConnectionError", True),
        (ProviderResponseError("openai", "bad json"), "ProviderResponseError", False),
        (ThreadError("identity_conflict", "moved"), "ThreadError", False),
        (ThreadError("deleted", "gone"), "ThreadError", False),
        (ThreadCommitError("unknown outcome"), "ThreadCommitError", True),
        (ConfigurationError("bad"), "ConfigurationError", False),
        (RequestCompositionError("REQUEST_TOO_LARGE", "no fit"), "RequestCompositionError", False),
    ],
)
def test_status_and_class_map_to_type_and_retryability(
    error: Exception, expected_type: str, retryable: bool
) -> None:
    mapped = to_application_error(error)
    assert isinstance(mapped, ApplicationError)
    assert mapped.type == expected_type
    assert mapped.non_retryable is (not retryable)


def test_retry_after_becomes_next_retry_delay() -> None:
    mapped = to_application_error(ProviderHTTPError("openai", 429, retry_after=1.5))
    assert isinstance(mapped, ApplicationError)
    assert mapped.next_retry_delay == timedelta(seconds=1.5)


def test_thread_error_code_is_the_first_detail() -> None:
    mapped = to_application_error(ThreadError("identity_conflict", "moved"))
    assert isinstance(mapped, ApplicationError)
    assert mapped.details[0] == "identity_conflict"


def test_unknown_errors_pass_through_for_temporal_to_retry() -> None:
    error = RuntimeError("boom")
    assert to_application_error(error) is error


async def test_decorated_activity_reraises_unknown_errors_without_a_self_cause() -> None:
    from activities._errors import maps_errors

    @maps_errors
    async def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError) as raised:
        await broken()
    assert raised.value.__cause__ is not raised.value
