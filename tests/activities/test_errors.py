"""Activities' exceptions leave as the registry's `ApplicationError`s (`vocabulary.failures`)."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities import to_application_error
from crux._outcomes import rebuild_error
from crux.errors import (
    ConfigurationError,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderResponseError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RequestCompositionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
    http_error,
)
from vocabulary.details import DETAILS_VERSION, ErrorDetails, decode_details, encode_details


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


def test_thread_error_code_travels_in_the_keyed_details() -> None:
    mapped = to_application_error(ThreadError("identity_conflict", "moved"))
    assert isinstance(mapped, ApplicationError)
    assert decode_details(mapped.details, mapped.type).code == "identity_conflict"
    assert mapped.details[0]["crux_details"] == DETAILS_VERSION


def test_unknown_errors_fail_at_once_naming_only_their_class() -> None:
    mapped = to_application_error(RuntimeError("secret text"))
    assert isinstance(mapped, ApplicationError)
    assert mapped.type == "InternalError"
    assert mapped.non_retryable
    assert "secret" not in str(mapped)


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "refused secret"),
        TimeoutError("secret"),
        asyncpg.AdminShutdownError("secret"),
    ],
)
def test_errors_nobody_classified_are_internal_even_driver_ones(error: Exception) -> None:
    # The stores classify driver errors (`storage/_failures.py`); one that reaches an
    # activity unclassified is a bug, never waited out as an outage.
    mapped = to_application_error(error)
    assert (mapped.type, mapped.non_retryable) == ("InternalError", True)
    assert "secret" not in str(mapped)


def test_storage_outages_from_the_stores_are_retryable_and_typed() -> None:
    mapped = to_application_error(
        StorageUnavailableError("storage unavailable (AdminShutdownError)")
    )
    assert (mapped.type, mapped.non_retryable) == ("StorageUnavailableError", False)


@pytest.mark.parametrize(
    ("status", "expected_type", "remedy"),
    [
        (401, "ProviderAuthError", "OPENAI_API_KEY"),
        (403, "ProviderAuthError", "OPENAI_API_KEY"),
        (404, "ProviderNotFoundError", "openai:gpt-x"),
    ],
)
def test_provider_http_errors_name_status_host_model_and_remedy(
    status: int, expected_type: str, remedy: str
) -> None:
    error = http_error("openai", status)
    error.host = "127.0.0.1:9"
    error.model = "openai:gpt-x"
    mapped = to_application_error(error)
    assert isinstance(mapped, ApplicationError)
    assert mapped.type == expected_type
    assert mapped.non_retryable
    assert decode_details(mapped.details, mapped.type) == ErrorDetails(
        provider="openai", status=status, host="127.0.0.1:9", model="openai:gpt-x"
    )
    assert remedy in str(mapped) and "127.0.0.1:9" in str(mapped)


def test_refused_connection_names_the_base_url_variable() -> None:
    error = ProviderConnectionError("openai", "connection failed (ConnectError)")
    assert isinstance(error, ProviderUnavailableError)
    mapped = to_application_error(error)
    assert isinstance(mapped, ApplicationError)
    assert mapped.type == "ProviderConnectionError" and not mapped.non_retryable
    assert "OPENAI_BASE_URL" in str(mapped)


async def test_decorated_activity_fails_unknown_errors_without_their_text() -> None:
    from activities._errors import maps_errors

    @maps_errors
    async def broken() -> None:
        raise RuntimeError("secret text")

    with pytest.raises(ApplicationError) as raised:
        await broken()
    assert raised.value.__cause__ is None
    assert "secret" not in str(raised.value)


async def test_decorated_activity_tells_provider_errors_the_model() -> None:
    from activities._errors import maps_errors

    class Request:
        model = "openai:gpt-x"

    @maps_errors
    async def call(request: Request) -> None:
        raise http_error("openai", 404)

    with pytest.raises(ApplicationError) as raised:
        await call(Request())
    assert decode_details(raised.value.details).model == "openai:gpt-x"


def test_details_of_earlier_releases_still_decode() -> None:
    assert decode_details(["REQUEST_TOO_LARGE", {"limit": 5}, "request_1"]) == ErrorDetails(
        code="REQUEST_TOO_LARGE", diagnostics={"limit": 5}, request_id="request_1"
    )
    assert decode_details(["openai", 429, "h:1", "openai:m"], "ProviderHTTPError") == (
        ErrorDetails(provider="openai", status=429, host="h:1", model="openai:m")
    )
    assert decode_details([]) == ErrorDetails()


def test_details_round_trip_and_leave_unset_fields_out() -> None:
    details = ErrorDetails(code="identity_conflict", diagnostics={"rounds": 3})
    encoded = encode_details(details)
    assert set(encoded) == {"crux_details", "code", "diagnostics"}
    assert decode_details([encoded]) == details


def test_the_provider_error_type_reaches_the_caller() -> None:
    raised = ProviderHTTPError("anthropic", 529, error_type="overloaded_error")
    mapped = to_application_error(raised)
    assert isinstance(mapped, ApplicationError)
    details = decode_details(mapped.details, mapped.type)
    assert details.code == "overloaded_error"
    rebuilt = rebuild_error(
        mapped.type, mapped.message, details, non_retryable=mapped.non_retryable
    )
    assert isinstance(rebuilt, ProviderHTTPError)
    assert (rebuilt.status_code, rebuilt.error_type, rebuilt.retryable) == (
        529,
        "overloaded_error",
        True,
    )
