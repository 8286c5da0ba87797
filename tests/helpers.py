"""Test helpers: a worker on a fresh task queue and an eventually-style poll."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import asyncpg
from google.protobuf import json_format
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue

from contracts.activities import PrepareSummaryInput
from crux._notices import serving
from crux._worker import build_worker, worker_resources
from crux.config import Settings
from crux.hooks import StepHook, SuccessHook
from crux.prompts import Prompt
from crux.runtime import Runtime
from crux.safety import SafetyPolicy
from crux.tools import Tool

T = TypeVar("T")


@dataclass
class RunningWorker:
    """A worker running for one test, and a runtime that targets it."""

    task_queue: str
    settings: Settings
    runtime: Runtime


def settings_for(
    database_url: str,
    *,
    openai_base_url: str | None = None,
    anthropic_base_url: str | None = None,
) -> Settings:
    values: dict[str, object] = {"database_url": database_url, "log_format": "json"}
    if openai_base_url:
        values["openai_base_url"] = openai_base_url
        values["openai_api_key"] = "sk-test-not-a-secret"
    if anthropic_base_url:
        values["anthropic_base_url"] = anthropic_base_url
        values["anthropic_api_key"] = "sk-ant-test-not-a-secret"
    return Settings.model_validate(values)


@asynccontextmanager
async def new_worker(
    client: Client,
    pool: asyncpg.Pool,
    settings: Settings,
    *,
    prompts: Iterable[Prompt] = (),
    default_model: str = "offline:echo",
    tools: Iterable[Tool] = (),
    hooks: Iterable[StepHook] = (),
    policies: Iterable[SafetyPolicy] = (),
    success_hooks: Iterable[SuccessHook] = (),
    task_queue: str | None = None,
) -> AsyncGenerator[RunningWorker]:
    """Run a real worker on a unique task queue (or `task_queue`) for the block."""
    task_queue = task_queue or f"crux-test-{uuid.uuid4().hex[:10]}"
    settings = settings.model_copy(update={"task_queue": task_queue})
    async with worker_resources(
        settings,
        pool=pool,
        prompts=prompts,
        tools=tools,
        hooks=hooks,
        policies=policies,
        success_hooks=success_hooks,
    ) as activities:
        worker = build_worker(client, task_queue=task_queue, activities=activities)
        async with worker:
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=default_model)
            async with serving():  # as `crux.Worker`: answered runs close before it stops
                yield RunningWorker(task_queue=task_queue, settings=settings, runtime=runtime)


async def grow_thread(
    runtime: Runtime,
    thread_id: str,
    model: str,
    text: Callable[[int], str],
    *,
    turns: int = 6,
    ids: str | None = "grow",
) -> None:
    """Run `turns` plain turns on `thread_id`, so that managed history has older turns to sum.

    Args:
        runtime: The runtime that runs them.
        thread_id: The Thread.
        model: The model of every turn.
        text: The user text of turn `n`.
        turns: How many turns.
        ids: Generation ids are `<ids>-<n>`; `None` lets each turn draw its own.
    """
    for turn in range(turns):
        await runtime.generate(
            text(turn),
            thread=thread_id,
            model=model,
            generation_id=None if ids is None else f"{ids}-{turn}",
        )


async def eventually(
    probe: Callable[[], Awaitable[T]],
    predicate: Callable[[T], bool],
    *,
    timeout: float = 20.0,
    interval: float = 0.1,
) -> T:
    """Poll `probe` until `predicate` holds, or fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if predicate(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not reached in {timeout}s; last value: {value!r}")
        await asyncio.sleep(interval)


async def closed_run(client: Client, workflow_id: str) -> WorkflowHandle[Any, Any]:
    """The run, once it closed: `generate` returns at the commit, the run closes just after.

    A test that inspects the run itself (its history, status, search attributes) reads it
    once it ended, however it ended.
    """
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    with contextlib.suppress(Exception):  # a failed run is closed too
        await asyncio.wait_for(handle.result(), 30)
    return handle


def payload_text(node: object) -> str:
    """Every payload of a history (`WorkflowHistory.to_json_dict()`), decoded and joined."""
    if isinstance(node, dict):
        items: dict[str, object] = node
        data = items.get("data")
        if isinstance(data, str) and "metadata" in items:
            return base64.b64decode(data).decode("utf-8", "replace")
        return "\n".join(payload_text(value) for value in items.values())
    if isinstance(node, list):
        values: list[object] = node
        return "\n".join(payload_text(value) for value in values)
    return ""


def summary_input_without_thread(prefix: str) -> PrepareSummaryInput:
    """A summary preparation of a Thread that does not exist (its preparation refuses)."""
    return PrepareSummaryInput(
        thread_id=f"{prefix}:{uuid.uuid4().hex[:6]}",
        owner="main",
        through_id="gen:missing:assistant",
        strategy="adaptive",
        model="offline:echo",
        counting_model="offline:echo",
        generation_id="g",
    )


async def record_history(client: Client, workflow_id: str, name: str) -> None:
    """Save a finished workflow's history for the replay suite (`CRUX_RECORD_HISTORIES=1`).

    Histories go to the current command version's folder. A history already recorded under
    `name` is kept: it guards the code path it was recorded on, so re-recording it would
    hide a change of that path (a new command version starts an empty folder).
    """
    import os

    from tests.replay.scenarios import SCENARIOS, current_histories

    assert name in SCENARIOS, f"add {name} to tests/replay/scenarios.py"
    if os.environ.get("CRUX_RECORD_HISTORIES") != "1":
        return
    folder = current_histories()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.json"
    if target.exists():
        return
    history = await (await closed_run(client, workflow_id)).fetch_history()
    target.write_text(history.to_json(), encoding="utf-8")


async def workflow_metadata(
    handle: WorkflowHandle[Any, Any], *, rpc_timeout: timedelta | None = None
) -> WorkflowMetadata:
    """The run's built-in metadata query (its current details), as any SDK receives it.

    The answer must be a `json/plain` payload (what every SDK's default converter decodes,
    and what a TypeScript worker answers); it is parsed here as the protobuf JSON mapping.
    """
    raw = await handle.query(
        "__temporal_workflow_metadata", result_type=RawValue, rpc_timeout=rpc_timeout
    )
    assert raw.payload.metadata["encoding"] == b"json/plain"
    return json_format.Parse(raw.payload.data, WorkflowMetadata(), ignore_unknown_fields=True)


def documented_workflow_id(workflow: str, payload: object, fallback: str) -> str:
    """The id a run of `workflow` with `payload` must go by, `fallback` for an invalid input.

    Generations and parallel runs refuse any other id (`workflow_id_mismatch`), so a test
    that means a valid input to run starts it under this one.
    """
    from pydantic import ValidationError

    from contracts.generation import GenerationInput
    from contracts.parallel import ParallelInput
    from vocabulary.errors import CruxError
    from vocabulary.ids import parallel_workflow_id

    if not isinstance(payload, dict):
        return fallback
    try:
        if workflow == "ManagedGenerationWorkflow":
            return GenerationInput.model_validate(payload).workflow_id()
        if workflow == "ParallelGenerationWorkflow":
            return parallel_workflow_id(ParallelInput.model_validate(payload).parallel_id)
    except (ValidationError, CruxError, RecursionError):
        return fallback
    return fallback


async def worker_polls(client: Client, task_queue: str, *, timeout: float = 90) -> None:
    """Wait until a worker polls `task_queue` for workflow tasks (a worker process started).

    A call started on a task queue nobody has polled yet fails fast with `NoWorkerError`, so
    a test that starts its worker as a process waits for it first, as a deployment would.
    """
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )

    async def pollers() -> int:
        return len((await client.workflow_service.describe_task_queue(request)).pollers)

    await eventually(pollers, lambda count: count > 0, timeout=timeout)
