"""Typed failures as a client of another language sees them: a type and one JSON object.

Real runs fail in each error family a run reaches without a fault injector (a storage outage,
an abandoned commit and an internal error are covered by the registry's round-trip tests
through the same failure converter); a client with the SDK's default converter
reads each failure's type, its retry flag and its details, a plain JSON object holding only
the keys and code values the failure registry declares for its family (the reference page
`docs/reference/failures.md` is generated from the same declarations).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.converter import DataConverter
from temporalio.exceptions import ActivityError, ApplicationError

from providers.loopback import ErrorReply, LoopbackOpenAIServer, RawReply, TextReply
from tests.helpers import RunningWorker, eventually, new_worker, settings_for
from vocabulary.errors import ErrorType
from vocabulary.failures import FAMILIES

MODEL = "openai:gpt-4o-mini"


@pytest.fixture
async def plain(client: Client) -> Client:
    """A client of the same server with the SDK's default data converter."""
    config = client.config()
    config["data_converter"] = DataConverter.default
    return Client(**config)


@pytest.fixture
async def worker(
    plain: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> AsyncIterator[RunningWorker]:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(plain, pool, settings) as running:
        yield running


def _checked(cause: BaseException | None) -> ApplicationError:
    """The typed failure, its details checked against its family's declaration."""
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError), type(cause)
    family = FAMILIES[ErrorType(cause.type)]
    (details,) = cause.details
    assert isinstance(details, dict), details
    assert details["crux_details"] == 1
    assert set(details) - {"crux_details"} <= set(family.keys), (cause.type, details)
    if family.codes and "code" in details:
        assert details["code"] in family.codes
    if family.retry_rule == "never":
        assert cause.non_retryable
    if family.retry_rule == "always":
        assert not cause.non_retryable
    return cause


async def _failure(
    plain: Client, worker: RunningWorker, request: dict[str, Any]
) -> ApplicationError:
    generation_id = f"fail-{uuid.uuid4().hex[:8]}"
    payload = {"generation_id": generation_id, "model": MODEL, "input": "hi", **request}
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(
            plain.execute_workflow(
                "ManagedGenerationWorkflow",
                payload,
                id=f"crux/gen/{generation_id}",
                task_queue=worker.task_queue,
            ),
            60,
        )
    return _checked(raised.value.cause)


Scenario = Callable[[LoopbackOpenAIServer], None]

NO_RETRY = {"attempt_policy": {"max_attempts": 1}}


def _reply(*replies: Any) -> Scenario:
    return lambda server: server.enqueue(*replies)


CASES: list[tuple[str, Scenario, dict[str, Any], dict[str, Any]]] = [
    ("invalid input", _reply(), {"max_tool_rounds": 99}, {"code": "invalid_input"}),
    (
        "too large",
        _reply(),
        {"input_budget": {"max": 1}},
        {"code": "REQUEST_TOO_LARGE"},
    ),
    (
        "refused key",
        _reply(ErrorReply(status=401)),
        {},
        {"provider": "openai", "status": 401, "model": MODEL},
    ),
    (
        "unknown model",
        _reply(ErrorReply(status=404)),
        {},
        {"provider": "openai", "status": 404},
    ),
    (
        "server error",
        _reply(ErrorReply(status=500, error_type="server_error")),
        NO_RETRY,
        {"provider": "openai", "status": 500, "code": "server_error"},
    ),
    (
        "malformed response",
        _reply(RawReply(body=b"{not json")),
        NO_RETRY,
        {"provider": "openai"},
    ),
    ("missing hook", _reply(), {"prepare_step": "no-such-hook"}, {"code": "hook_not_registered"}),
    (
        "invalid output",
        _reply(TextReply(text="not json at all")),
        {
            "output": {
                "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
                "max_retries": 0,
            }
        },
        {"code": "output_invalid"},
    ),
]

EXPECTED_TYPES = {
    "invalid input": ErrorType.CONFIGURATION,
    "too large": ErrorType.REQUEST_COMPOSITION,
    "refused key": ErrorType.PROVIDER_AUTH,
    "unknown model": ErrorType.PROVIDER_NOT_FOUND,
    "server error": ErrorType.PROVIDER_HTTP,
    "malformed response": ErrorType.PROVIDER_RESPONSE,
    "missing hook": ErrorType.PREPARATION,
    "invalid output": ErrorType.OUTPUT_VALIDATION,
}


@pytest.mark.parametrize(
    ("name", "scenario", "request_fields", "expected"), CASES, ids=[case[0] for case in CASES]
)
async def test_a_failed_run_carries_its_family_and_details_as_plain_json(
    plain: Client,
    worker: RunningWorker,
    openai_server: LoopbackOpenAIServer,
    name: str,
    scenario: Scenario,
    request_fields: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    scenario(openai_server)
    cause = await _failure(plain, worker, request_fields)
    assert cause.type == EXPECTED_TYPES[name]
    details = cause.details[0]
    assert {key: details.get(key) for key in expected} == expected
    if name == "server error":
        assert not cause.non_retryable  # a 500 may succeed later: the caller may retry


async def test_a_reused_generation_id_fails_with_the_thread_error_code(
    plain: Client, worker: RunningWorker
) -> None:
    generation_id = f"reused-{uuid.uuid4().hex[:6]}"
    first = {"generation_id": generation_id, "thread_id": "reuse", "input": "first"}
    workflow_id = f"crux/gen/reuse/{generation_id}"
    await plain.execute_workflow(
        "ManagedGenerationWorkflow", first, id=workflow_id, task_queue=worker.task_queue
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await plain.execute_workflow(
            "ManagedGenerationWorkflow",
            {**first, "input": "different"},
            id=workflow_id,
            task_queue=worker.task_queue,
        )
    cause = _checked(raised.value.cause)
    assert (cause.type, cause.details[0]["code"]) == ("ThreadError", "identity_conflict")


async def test_an_operator_command_refused_carries_the_stage(
    plain: Client, worker: RunningWorker, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(TextReply(text="slow", delay_seconds=3))
    generation_id = f"op-{uuid.uuid4().hex[:6]}"
    handle = await plain.start_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": generation_id, "model": MODEL, "input": "hi"},
        id=f"crux/gen/{generation_id}",
        task_queue=worker.task_queue,
    )
    await eventually(_count(openai_server), lambda count: count == 1)
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await handle.execute_update("retry_now")
    cause = _checked(raised.value.cause)
    assert cause.type == "OperatorError"
    assert cause.details[0] == {"crux_details": 1, "code": "wrong_stage", "stage": "invoking"}
    await handle.result()


def _count(server: LoopbackOpenAIServer) -> Callable[[], Awaitable[int]]:
    async def count() -> int:
        return len(server.requests)

    return count
