"""What a Temporal client of any language gets, seen through the SDK's default converter.

A plain client (the SDK's default JSON converter, no Crux code) starts every workflow with
its published example input; a refused start ends `failed` wherever a run reports its stage
(the queries, the current details, `CruxStage`) with its failure's structured details; a
run under another workflow id than its documented one is refused before it reads or stages
anything, and the run under the right id commits its turn once; current details, static
summary and details are plain JSON payloads; the reply of an ad-hoc run is read by its
generation id once, then erased (or erased unread on request).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import RawValue, WorkflowIDConflictPolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from contracts.schemas import SCHEMAS
from contracts.search import STAGE
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import RunningWorker, eventually, new_worker, settings_for, workflow_metadata
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.ids import (
    member_workflow_id,
    parallel_workflow_id,
    summary_key,
    workflow_id_for,
)

EXAMPLES = {spec.name: spec.example for spec in SCHEMAS}


@pytest.fixture
async def plain(client: Client) -> Client:
    """A client of the same server with the SDK's default data converter."""
    config = client.config()
    config["data_converter"] = DataConverter.default
    return Client(**config)


@pytest.fixture
async def worker(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> AsyncIterator[RunningWorker]:
    async with new_worker(client, pool, settings_for(database_url)) as running:
        yield running


async def _refusal(handle: WorkflowHandle[Any, Any]) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(handle.result(), 30)
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def _stage_attribute(handle: WorkflowHandle[Any, Any]) -> str | None:
    described = await handle.describe()
    return described.typed_search_attributes.get(STAGE)


# --- the published examples run ------------------------------------------------------------


async def test_every_example_input_is_accepted_by_its_workflow(
    plain: Client, worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    generation = EXAMPLES["generation-input"]
    outcome = await plain.execute_workflow(
        "ManagedGenerationWorkflow",
        generation,
        id=workflow_id_for(generation["generation_id"], generation["thread_id"]),
        task_queue=worker.task_queue,
    )
    assert isinstance(outcome, dict)
    assert outcome["thread_commit"]["status"] == "selected"
    view = await ThreadStore(pool).read_history_view(generation["thread_id"])
    assert [message.role for message in view.messages] == ["user", "assistant"]

    parallel = EXAMPLES["parallel-input"]
    result = await plain.execute_workflow(
        "ParallelGenerationWorkflow",
        parallel,
        id=parallel_workflow_id(parallel["parallel_id"]),
        task_queue=worker.task_queue,
    )
    assert [member["failure"] for member in result["members"]] == [None, None]

    summary = EXAMPLES["summary-input"]
    handle = await plain.start_workflow(
        "SummaryWorkflow",
        summary,
        id="crux/summary/"
        + summary_key(
            summary["thread_id"], summary["through_id"], summary["strategy"], summary["model"]
        ),
        task_queue=worker.task_queue,
    )
    # It summarises the prefix of the Thread the generation example wrote.
    prepared = await handle.result()
    assert prepared["summary"]["covers"] >= 1


# --- a refused start ends failed everywhere --------------------------------------------------


async def _assert_refused_everywhere(
    handle: WorkflowHandle[Any, Any], code: str, fields: list[str] | None = None
) -> None:
    cause = await _refusal(handle)
    assert cause.type == "ConfigurationError" and cause.non_retryable
    (details,) = cause.details
    assert isinstance(details, dict)
    assert details["crux_details"] == 1 and details["code"] == code
    if fields is not None:
        assert details["fields"] == fields
    assert await handle.query("get_stage") == "failed"
    status = await handle.query("describe")
    assert status["stage"] == "failed"
    assert status["details"] == f"ConfigurationError ({code})"
    assert await _stage_attribute(handle) == "failed"
    metadata = await workflow_metadata(handle)
    assert metadata.current_details == f"stage: failed\nerror: ConfigurationError ({code})"


async def test_an_invalid_start_ends_failed_in_every_place_a_run_reports_its_stage(
    plain: Client, worker: RunningWorker
) -> None:
    generation_id = f"refused-{uuid.uuid4().hex[:8]}"
    handle = await plain.start_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": generation_id, "max_tool_rounds": 99},
        id=workflow_id_for(generation_id, None),
        task_queue=worker.task_queue,
    )
    await _assert_refused_everywhere(handle, "invalid_input", ["max_tool_rounds"])


async def test_a_start_with_two_arguments_ends_failed_too(
    plain: Client, worker: RunningWorker
) -> None:
    handle = await plain.start_workflow(
        "ManagedGenerationWorkflow",
        args=[{"generation_id": "a"}, {"generation_id": "b"}],
        id=f"crux/gen/two-{uuid.uuid4().hex[:8]}",
        task_queue=worker.task_queue,
    )
    await _assert_refused_everywhere(handle, "too_many_arguments")


async def test_refused_summary_and_parallel_runs_say_failed_with_their_code(
    plain: Client, worker: RunningWorker
) -> None:
    summary = await plain.start_workflow(
        "SummaryWorkflow",
        {"thread_id": "t", "model": "offline:echo"},
        id=f"crux/summary/refused-{uuid.uuid4().hex[:8]}",
        task_queue=worker.task_queue,
    )
    assert (await _refusal(summary)).details[0]["code"] == "invalid_input"
    assert await _stage_attribute(summary) == "failed"
    current = (await workflow_metadata(summary)).current_details
    assert current == "stage: failed\nerror: ConfigurationError (invalid_input)"

    parallel = await plain.start_workflow(
        "ParallelGenerationWorkflow",
        RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b"[1, 2]")),
        id=f"crux/parallel/refused-{uuid.uuid4().hex[:8]}",
        task_queue=worker.task_queue,
    )
    assert (await _refusal(parallel)).details[0]["code"] == "not_an_object"
    current = (await workflow_metadata(parallel)).current_details
    assert current == "stage: failed\nerror: ConfigurationError (not_an_object)"


# --- the workflow id -----------------------------------------------------------------------


async def test_a_run_under_another_id_is_refused_and_the_documented_run_commits_once(
    plain: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"ids:{uuid.uuid4().hex[:6]}"
    generation = {
        "generation_id": "g1",
        "thread_id": thread_id,
        "model": "openai:gpt-4o-mini",
        "input": "Hello",
    }
    documented = workflow_id_for("g1", thread_id)
    # The documented run waits in its provider call, its user turn staged.
    openai_server.enqueue(TextReply(text="Hi there", delay_seconds=3))
    async with new_worker(plain, pool, settings) as worker:
        legitimate = await plain.start_workflow(
            "ManagedGenerationWorkflow", generation, id=documented, task_queue=worker.task_queue
        )
        await eventually(lambda: _requests(openai_server), lambda count: count == 1)
        staged = await _staged_rows(pool)
        assert staged > 0

        impostor = await plain.start_workflow(
            "ManagedGenerationWorkflow",
            generation,
            id=f"my-own-id-{uuid.uuid4().hex[:6]}",
            task_queue=worker.task_queue,
        )
        cause = await _refusal(impostor)
        assert cause.type == "ConfigurationError"
        details = cause.details[0]
        assert details["code"] == "workflow_id_mismatch"
        assert details["diagnostics"] == {"expected_workflow_id": documented}
        assert documented in cause.message
        # Refused before it read or staged anything, and without touching the other run's rows.
        assert await _staged_rows(pool) == staged
        assert await impostor.query("get_stage") == "failed"

        outcome = await legitimate.result()
        assert outcome["thread_commit"]["status"] == "selected"
        # After the commit, another id is refused again: the turn stays committed once.
        again = await plain.start_workflow(
            "ManagedGenerationWorkflow",
            generation,
            id=f"crux/gen/{uuid.uuid4().hex[:6]}",
            task_queue=worker.task_queue,
        )
        assert (await _refusal(again)).details[0]["code"] == "workflow_id_mismatch"
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [message.role for message in view.messages] == ["user", "assistant"]
    assert len(openai_server.requests) == 1


async def test_a_composition_member_runs_only_as_its_parents_child(
    plain: Client, worker: RunningWorker
) -> None:
    parent = parallel_workflow_id(f"p-{uuid.uuid4().hex[:6]}")
    member = {
        "generation_id": "member-1",
        "input": "hi",
        "composition": {"parent_workflow_id": parent, "member": "critic"},
    }
    # Its own documented id, but started by a client instead of its parent.
    handle = await plain.start_workflow(
        "ManagedGenerationWorkflow",
        member,
        id=member_workflow_id(parent, "critic"),
        task_queue=worker.task_queue,
    )
    cause = await _refusal(handle)
    assert cause.details[0]["code"] == "workflow_id_mismatch"
    assert parent in cause.message


async def test_a_parallel_run_under_another_id_is_refused(
    plain: Client, worker: RunningWorker
) -> None:
    parallel = EXAMPLES["parallel-input"]
    handle = await plain.start_workflow(
        "ParallelGenerationWorkflow",
        parallel,
        id=f"crux/parallel/other-{uuid.uuid4().hex[:6]}",
        task_queue=worker.task_queue,
    )
    cause = await _refusal(handle)
    assert cause.details[0]["code"] == "workflow_id_mismatch"
    expected = parallel_workflow_id(parallel["parallel_id"])
    assert cause.details[0]["diagnostics"] == {"expected_workflow_id": expected}


async def _requests(server: LoopbackOpenAIServer) -> int:
    return len(server.requests)


async def _staged_rows(pool: asyncpg.Pool) -> int:
    return await pool.fetchval("SELECT count(*) FROM crux_generation_staging")


# --- plain payloads --------------------------------------------------------------------------


async def test_current_details_summary_and_details_are_plain_json(
    client: Client, plain: Client, worker: RunningWorker
) -> None:
    result = await worker.runtime.generate("Hello", generation_id=f"plain-{uuid.uuid4().hex[:6]}")
    handle = plain.get_workflow_handle(workflow_id_for(result.generation_id, None))
    # The SDK's default converter decodes every one of them.
    metadata = await handle.query("__temporal_workflow_metadata")
    assert isinstance(metadata, dict)
    assert metadata["currentDetails"].startswith("stage: completed\n")
    assert metadata["definition"]["type"] == "ManagedGenerationWorkflow"
    described = await handle.describe()
    assert (await described.static_summary() or "").startswith("generate · offline:echo")
    assert f"generation: {result.generation_id}" in (await described.static_details() or "")
    metadata_payload = await handle.query("__temporal_workflow_metadata", result_type=RawValue)
    user_metadata = described.raw_description.execution_config.user_metadata
    for payload in (metadata_payload.payload, user_metadata.summary, user_metadata.details):
        assert payload.metadata["encoding"] == b"json/plain"
        json.loads(payload.data)
    # A Python client with the project's converter still reads a `WorkflowMetadata`.
    from temporalio.api.sdk.v1 import WorkflowMetadata

    from crux.plugin import crux_data_converter

    config = client.config()
    config["data_converter"] = crux_data_converter()
    typed = (
        await Client(**config)
        .get_workflow_handle(handle.id)
        .query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    )
    assert typed.current_details == metadata["currentDetails"]


# --- approval decisions ----------------------------------------------------------------------


async def test_a_malformed_or_misdirected_decision_is_refused_typed(
    plain: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(TextReply(text="slow", delay_seconds=3))
    generation_id = f"decide-{uuid.uuid4().hex[:6]}"
    async with new_worker(plain, pool, settings) as worker:
        handle = await plain.start_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": generation_id, "model": "openai:gpt-4o-mini", "input": "hi"},
            id=workflow_id_for(generation_id, None),
            task_queue=worker.task_queue,
        )
        await eventually(lambda: _requests(openai_server), lambda count: count == 1)
        refusals: list[dict[str, Any]] = []
        for decision in (
            {"call_id": "call_1", "reason_code": "Not A Code"},
            {"call_id": "call_1", "extra": "x"},
            {"call_id": "call_1"},
        ):
            with pytest.raises(WorkflowUpdateFailedError) as raised:
                await handle.execute_update("deny", decision)
            cause = raised.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "ConfigurationError"
            refusals.append(cause.details[0])
        await handle.result()
    assert [(r["code"], r.get("fields")) for r in refusals] == [
        ("invalid_input", ["reason_code"]),
        ("invalid_input", None),
        ("invalid_input", ["call_id"]),
    ]


# --- reading the reply of a run a plain client started ---------------------------------------


async def test_a_plain_clients_ad_hoc_reply_is_read_once_then_erased(
    plain: Client, worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    """The outcome holds ids only; the reply is read by id, erased once read or on request."""
    runtime = worker.runtime
    for generation_id in ("read-1", "erase-1", "keep-1"):
        outcome = await plain.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": generation_id, "input": "Hello"},
            id=workflow_id_for(generation_id, None),
            task_queue=worker.task_queue,
        )
        assert outcome["thread_commit"] is None
        assert "text" not in json.dumps(outcome)

    read = await runtime.read_generation("read-1")
    assert read.text and read.result.generation_id == "read-1"
    with pytest.raises(ThreadError) as gone:
        await runtime.read_generation("read-1")
    assert gone.value.code == "not_found"
    assert not await runtime.erase_generation("read-1")

    assert await runtime.erase_generation("erase-1")
    assert not await runtime.erase_generation("erase-1")
    with pytest.raises(ThreadError):
        await runtime.read_generation("erase-1")

    kept = await runtime.read_generation("keep-1", erase=False)
    assert (await runtime.read_generation("keep-1")).text == kept.text
    # The content-free ledger row stays: a repeated start replays instead of running again.
    replay = await plain.execute_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": "keep-1", "input": "Hello"},
        id=workflow_id_for("keep-1", None),
        task_queue=worker.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    assert replay["generation_id"] == "keep-1" and replay["replayed"]
    # What stays is the content-free identity (a fingerprint) of each request.
    kinds = await pool.fetch("SELECT DISTINCT kind FROM crux_generation_staging")
    assert [row["kind"] for row in kinds] == ["identity"]

    # The facade's own ad-hoc call: read once by `generate`; again, it replays without text.
    first = await runtime.generate("Hi", generation_id="again-1")
    assert first.text and not first.result.replayed
    with pytest.raises(ThreadError) as erased:
        await runtime.generate("Hi", generation_id="again-1")
    assert erased.value.code == "not_found"

    with pytest.raises(ThreadError):
        await runtime.read_generation("never-ran")
    with pytest.raises(ConfigurationError):
        await runtime.read_generation("")
    with pytest.raises(ConfigurationError):
        await runtime.erase_generation("g", thread=42)
