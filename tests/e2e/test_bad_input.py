"""Malformed workflow input from any client fails fast, typed and content-free."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from storage import ThreadStore
from tests.helpers import RunningWorker, documented_workflow_id, new_worker, settings_for

SECRET = "do-not-echo-this-value"

BAD_INPUTS = st.one_of(
    st.fixed_dictionaries({"thread_id": st.integers()}),  # no generation_id
    st.fixed_dictionaries(
        {"generation_id": st.just("g"), "history": st.fixed_dictionaries({"kind": st.just(SECRET)})}
    ),
    st.fixed_dictionaries(
        {"generation_id": st.just("g"), "max_tool_rounds": st.integers(min_value=33)}
    ),
    st.fixed_dictionaries({"generation_id": st.just("g"), SECRET: st.text(max_size=5)}),
    st.fixed_dictionaries(
        {
            "generation_id": st.just("g"),
            "input_budget": st.fixed_dictionaries({"max": st.just(SECRET)}),
        }
    ),
)


@pytest.fixture
async def running_worker(client: Client, pool: asyncpg.Pool, database_url: str) -> Any:
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        yield worker


async def _start(client: Client, worker: RunningWorker, payload: dict[str, Any]) -> BaseException:
    fallback = f"crux/gen/bad/{uuid.uuid4().hex}"
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        payload,
        id=documented_workflow_id("ManagedGenerationWorkflow", payload, fallback),
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await handle.result()
    return raised.value.cause


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=BAD_INPUTS)
async def test_malformed_input_fails_the_workflow_with_a_configuration_error(
    client: Client, running_worker: RunningWorker, payload: dict[str, Any]
) -> None:
    cause = await _start(client, running_worker, payload)
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ConfigurationError"
    assert cause.non_retryable
    assert SECRET not in str(cause)


async def test_unrenderable_input_fails_typed_and_commits_nothing(
    client: Client, running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    cause = await _start(
        client, running_worker, {"generation_id": "empty", "thread_id": "bad:empty", "input": ""}
    )
    assert isinstance(cause.__cause__ or cause, ApplicationError)
    assert "ConfigurationError" in repr(cause) or "ConfigurationError" in repr(cause.__cause__)
    view = await ThreadStore(pool).read_history_view("bad:empty")
    assert view.messages == ()
