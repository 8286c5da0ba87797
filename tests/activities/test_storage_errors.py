"""Storage outages are typed apart, so provider attempt budgets count provider failures only."""

from __future__ import annotations

import pytest

from activities._errors import to_application_error
from activities._outage import Unstaged, keeping_side_effect
from crux.errors import (
    ErrorType,
    ProviderConnectionError,
    PublicationInterruptedError,
    StorageUnavailableError,
    ThreadCommitError,
    ThreadError,
)
from workflows import _options
from workflows._commit import COMMIT_TURN_LOCAL


@pytest.mark.parametrize(
    "error",
    [
        StorageUnavailableError("thread store unreachable for t"),
        # The Thread store's publication cut off by an outage: an unknown outcome that
        # waiting for storage repairs.
        PublicationInterruptedError("repeat the call", thread_id="t"),
    ],
)
def test_storage_outages_map_to_one_retryable_type(error: BaseException) -> None:
    mapped = to_application_error(error)
    assert mapped.type == ErrorType.STORAGE_UNAVAILABLE
    assert not mapped.non_retryable


@pytest.mark.parametrize(
    "error",
    [
        ThreadCommitError("repeat the call"),
        ThreadError("identity_conflict", "moved"),
        ProviderConnectionError("openai", "connection refused"),
        ConnectionRefusedError(111, "refused"),
    ],
)
def test_other_errors_are_not_storage_outages(error: BaseException) -> None:
    assert to_application_error(error).type != ErrorType.STORAGE_UNAVAILABLE


def test_activities_leave_storage_outages_to_the_workflow() -> None:
    # An outage during the provider stage must not spend the provider's attempts.
    for config in (
        _options.READ_REQUEST_LOCAL,
        _options.COUNT_REQUEST,
        _options.INVOKE_MODEL,
        _options.RUN_TOOL,
        _options.RECORD_PLAN_LOCAL,
        _options.PREPARE_SUMMARY_RUN,
    ):
        policy = config.get("retry_policy")
        assert policy is not None
        assert ErrorType.STORAGE_UNAVAILABLE.value in (policy.non_retryable_error_types or [])


def test_the_commit_is_retried_by_the_storage_wait_alone() -> None:
    policy = COMMIT_TURN_LOCAL.get("retry_policy")
    assert policy is not None and policy.maximum_attempts == 1


async def test_a_paid_result_is_written_after_a_short_outage_not_obtained_again() -> None:
    attempts: list[int] = []

    async def write() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise StorageUnavailableError("storage unavailable (ConnectionRefusedError)")
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
