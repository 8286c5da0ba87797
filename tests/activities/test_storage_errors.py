"""Storage outages are typed apart, so provider attempt budgets count provider failures only."""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities._errors import is_storage_unavailable, to_application_error
from activities._outage import Unstaged, keeping_side_effect
from crux.errors import (
    ErrorType,
    ProviderConnectionError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)
from workflows import _options


def _caused(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "refused"),
        FileNotFoundError(2, "no socket"),
        TimeoutError(),
        asyncpg.exceptions.ConnectionDoesNotExistError("closed mid-operation"),
        asyncpg.exceptions.CannotConnectNowError("starting up"),
        asyncpg.exceptions.AdminShutdownError("terminating connection"),
        asyncpg.InterfaceError("pool is closed"),
        StorageUnavailableError("thread store unreachable"),
        # The stores wrap connection failures of a publication as an unknown outcome.
        _caused(ThreadCommitError("repeat the call"), ConnectionResetError()),
    ],
)
def test_storage_outages_map_to_one_retryable_type(error: BaseException) -> None:
    assert is_storage_unavailable(error)
    mapped = to_application_error(error)
    assert isinstance(mapped, ApplicationError)
    assert mapped.type == ErrorType.STORAGE_UNAVAILABLE
    assert not mapped.non_retryable
    assert mapped.message == "storage unavailable"


@pytest.mark.parametrize(
    "error",
    [
        ThreadCommitError("repeat the call"),
        ThreadError("identity_conflict", "moved"),
        ProviderConnectionError("openai", "connection refused"),
        asyncpg.exceptions.UniqueViolationError("duplicate"),
    ],
)
def test_other_errors_are_not_storage_outages(error: BaseException) -> None:
    mapped = to_application_error(error)
    assert not isinstance(mapped, ApplicationError) or (
        mapped.type != ErrorType.STORAGE_UNAVAILABLE
    )


def test_activities_leave_storage_outages_to_the_workflow() -> None:
    # An outage during the provider stage must not spend the provider's attempts.
    for config in (
        _options.READ_REQUEST_LOCAL,
        _options.COUNT_REQUEST,
        _options.INVOKE_MODEL,
        _options.RUN_TOOL,
    ):
        policy = config.get("retry_policy")
        assert policy is not None
        assert ErrorType.STORAGE_UNAVAILABLE.value in (policy.non_retryable_error_types or [])


async def test_a_paid_result_is_written_after_a_short_outage_not_obtained_again() -> None:
    attempts: list[int] = []

    async def write() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError(111, "refused")
        return "staged"

    assert await keeping_side_effect(write) == "staged"
    assert len(attempts) == 3


async def test_other_write_errors_are_not_waited_out() -> None:
    attempts: list[int] = []

    async def write() -> str:
        attempts.append(1)
        raise ThreadError("invalid_message", "cannot be stored")

    with pytest.raises(ThreadError):
        await keeping_side_effect(write)
    assert len(attempts) == 1


def test_answers_held_through_an_outage_are_bounded_and_released_once_staged() -> None:
    held: Unstaged[str, int] = Unstaged(capacity=2)
    held.keep("a", 1)
    held.keep("b", 2)
    held.keep("c", 3)
    assert held.get("a") is None  # the oldest went first
    assert (held.get("b"), held.get("c")) == (2, 3)
    held.staged("b")
    assert held.get("b") is None
