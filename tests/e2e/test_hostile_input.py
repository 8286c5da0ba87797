"""Hostile workflow input from plain Temporal clients: every run ends typed, nothing written.

Every client-startable workflow (`ManagedGenerationWorkflow`, `SummaryWorkflow`,
`ParallelGenerationWorkflow`) is started from a plain `temporalio` client, with the
project's data converter and with the SDK's default converter, and with raw JSON payloads
(invalid UTF-8, 5,000-level nesting, NaN literals, duplicate keys, other encodings, zero or
two arguments). The inputs are a valid request with one field made hostile: megabyte strings
and 10^5-element lists, 1,200-level nesting, lone surrogates, NUL bytes, control characters,
SQL metacharacters and path separators in ids, NaN, infinities, 2**80, unknown fields and
wrong types. Every run must:

- end (fail with a `CruxError` type, or complete) within a bound;
- record no `WorkflowTaskFailed` event (no task failing and retrying forever);
- on a refusal, leave every PostgreSQL table exactly as it was, and name no hostile value in
  its failure message or details;
- leave the worker serving: an ordinary generation completes afterwards.

The `Runtime` methods get the same treatment in `test_hostile_runtime.py`. Examples share
one worker; `CRUX_FUZZ_EXAMPLES` sets the counts, and the module prints how many hostile
inputs it tried.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.service import RPCError

from crux.errors import ThreadError
from storage import ThreadStore
from telemetry.logs import configure_logging
from tests.helpers import RunningWorker, documented_workflow_id, new_worker, settings_for
from tests.hostile import (
    CANARY,
    HOSTILE_STRINGS,
    ID_MARK,
    MEGABYTE,
    STORABLE_IDS,
    assert_content_free,
    deep_json,
    drawn,
    examples,
    json_values,
    ordinary_generation_still_completes,
    table_digest,
)
from vocabulary.errors import ErrorType
from vocabulary.ids import workflow_id_for

RUN_BOUND_SECONDS = 60.0
"""A hostile run that has not ended by now counts as wedged."""

CRUX_TYPES = {member.value for member in ErrorType}
WORKFLOWS = ("ManagedGenerationWorkflow", "SummaryWorkflow", "ParallelGenerationWorkflow")

_tried = {"inputs": 0, "completed": 0, "refused": 0, "client": 0}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(
        f"\nhostile workflow inputs tried: {_tried['inputs']} "
        f"(completed {_tried['completed']}, failed typed {_tried['refused']}, "
        f"refused by the client or server {_tried['client']})"
    )


@pytest.fixture
async def running_worker(client: Client, pool: asyncpg.Pool, database_url: str) -> Any:
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        yield worker


@pytest.fixture
async def default_client(client: Client) -> Client:
    """A client of the same server with the SDK's default data converter."""
    return await Client.connect(
        client.service_client.config.target_host, namespace=client.namespace
    )


# --- hostile payloads ---------------------------------------------------------------------

_PATHS: tuple[tuple[str, ...], ...] = (
    ("generation_id",),
    ("thread_id",),
    ("owner",),
    ("model",),
    ("prompt_id",),
    ("input",),
    ("input",),
    ("input", "message"),
    ("input_ref",),
    ("messages_ref",),
    ("history",),
    ("history", "kind"),
    ("history", "messages"),
    ("history", "tokens"),
    ("history", "summary_model"),
    ("input_budget",),
    ("input_budget", "max"),
    ("input_budget", "optimize_at"),
    ("max_output_tokens",),
    ("contributors",),
    ("tools",),
    ("tool_choice",),
    ("max_tool_rounds",),
    ("stream",),
    ("storage_wait_seconds",),
    ("agent_id",),
    ("prepare_step",),
    ("settings",),
    ("settings", "temperature"),
    ("settings", "stop"),
    ("settings", "extra"),
    ("attempt_policy",),
    ("tool_policies",),
    ("approval_tools",),
    ("approval_timeout_seconds",),
    ("composition",),
    ("output",),
    ("output", "json_schema"),
    (CANARY,),  # an unknown field
)


_ID_FIELDS = frozenset(
    {
        "generation_id",
        "thread_id",
        "owner",
        "model",
        "prompt_id",
        "input_ref",
        "messages_ref",
        "agent_id",
        "prepare_step",
        "through_id",
        "parallel_id",
    }
)


def _base(workflow: str, tag: str) -> dict[str, Any]:
    if workflow == "SummaryWorkflow":
        return {"thread_id": f"hostile-{tag}", "through_id": "m1", "model": "offline:echo"}
    if workflow == "ParallelGenerationWorkflow":
        return {"parallel_id": f"p-{tag}", "members": []}
    return {"generation_id": f"g-{tag}", "thread_id": f"hostile-{tag}", "input": "hello"}


def _mutated(base: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    payload = dict(base)
    if len(path) == 1:
        payload[path[0]] = value
    else:
        payload[path[0]] = {path[1]: value}
    return payload


@st.composite
def _payloads(draw: st.DrawFn) -> tuple[str, Any]:
    workflow = draw(st.sampled_from(WORKFLOWS + ("ManagedGenerationWorkflow",) * 4))
    base = _base(workflow, uuid.uuid4().hex[:8])
    shape = draw(st.sampled_from(["field", "field", "field", "extra", "whole"]))
    # Valid-but-hostile ids and texts (SQL metacharacters, path separators) run to the end.
    value = draw(json_values | st.sampled_from(STORABLE_IDS))
    if shape == "whole":
        return workflow, value
    if shape == "extra":
        return workflow, {**base, draw(st.sampled_from(HOSTILE_STRINGS)): value}
    keys = tuple(sorted(base)) if workflow != "ManagedGenerationWorkflow" else ()
    path = draw(st.sampled_from([(k,) for k in keys] + [(CANARY,)] if keys else _PATHS))
    if path[0] in _ID_FIELDS and isinstance(value, str):
        # Ids are named in logs and errors (they are not content): mark them as ids.
        value = value.replace(CANARY, ID_MARK)
    return workflow, _mutated(base, path, value)


# --- running one hostile start ------------------------------------------------------------


def _typed_cause(failure: WorkflowFailureError) -> ApplicationError:
    """The run's typed failure: its cause, or (a failed activity or child) the cause's cause.

    A run that fails because an activity failed keeps the `ActivityError` on top, as the
    facade expects, with the activity's typed `ApplicationError` under it.
    """
    cause = failure.cause
    if isinstance(cause, ActivityError | ChildWorkflowError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError), f"untyped failure {type(cause).__name__}"
    return cause


async def _workflow_task_failures(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events)


async def _run_hostile(
    client: Client, worker: RunningWorker, pool: asyncpg.Pool, workflow: str, *args: Any
) -> str:
    """Start `workflow` with `args`, wait for its end and check every promise; the outcome."""
    _tried["inputs"] += 1
    before = await table_digest(pool)
    workflow_id = f"crux/hostile/{uuid.uuid4().hex}"
    if len(args) == 1:
        # A valid input runs under its documented id (any other is refused).
        workflow_id = documented_workflow_id(workflow, args[0], workflow_id)
    try:
        handle = await client.start_workflow(
            workflow,
            args=list(args),
            id=workflow_id,
            task_queue=worker.task_queue,
            execution_timeout=None,
        )
    except (RPCError, TypeError, ValueError, RecursionError, OverflowError) as refused:
        # The client could not encode the value, or the server refused it (over its blob
        # limit): nothing started, nothing written.
        _tried["client"] += 1
        del refused
        assert await table_digest(pool) == before
        return "client"
    try:
        await asyncio.wait_for(handle.result(), RUN_BOUND_SECONDS)
        outcome = "completed"
        _tried["completed"] += 1
    except WorkflowFailureError as failure:
        cause = _typed_cause(failure)
        assert cause.type in CRUX_TYPES, f"failure type {cause.type} is not a CruxError"
        assert_content_free(failure.cause)
        assert_content_free(cause)
        assert CANARY not in repr(cause.details)
        outcome = cause.type or "failed"
        _tried["refused"] += 1
        if cause.type == ErrorType.CONFIGURATION:
            assert await table_digest(pool) == before, "a refused input wrote rows"
    except TimeoutError:
        await handle.terminate()
        raise AssertionError(f"{workflow} did not end within {RUN_BOUND_SECONDS}s") from None
    assert await _workflow_task_failures(client, workflow_id) == 0, "a workflow task failed"
    return outcome


# --- the tests ----------------------------------------------------------------------------


async def test_hostile_inputs_from_plain_clients_end_typed_and_write_nothing(
    client: Client,
    default_client: Client,
    running_worker: RunningWorker,
    pool: asyncpg.Pool,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # The worker logs through the root logger: configure it here, whatever an earlier test
    # left behind (its level, or a stream captured then), and put that back afterwards.
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(log_format="json", level="info")
    try:
        await _hostile_plain_client_runs(client, default_client, running_worker, pool, capfd)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


async def _hostile_plain_client_runs(
    client: Client,
    default_client: Client,
    running_worker: RunningWorker,
    pool: asyncpg.Pool,
    capfd: pytest.CaptureFixture[str],
) -> None:
    outcomes: dict[str, int] = {}
    for index, (workflow, payload) in enumerate(drawn(_payloads(), examples(60))):
        # Alternate the project's pydantic converter and the SDK's default JSON converter.
        chosen = client if index % 2 else default_client
        outcome = await _run_hostile(chosen, running_worker, pool, workflow, payload)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == "completed" and workflow == "ManagedGenerationWorkflow":
            thread_id = payload.get("thread_id")
            if isinstance(thread_id, str):
                # The hostile-but-valid id addressed its own Thread: one whole turn in it.
                view = await ThreadStore(pool).read_history_view(thread_id)
                assert [m.role for m in view.messages] == ["user", "assistant"]
    await ordinary_generation_still_completes(running_worker)
    # The worker's log lines (failed activities and runs included) repeat no hostile content.
    captured = capfd.readouterr()
    logged = captured.out + captured.err
    assert "thread.turn.committed" in logged  # the worker's lines were captured
    assert CANARY not in logged
    print(f"\nplain-client outcomes: {dict(sorted(outcomes.items()))}")


def _raw(data: bytes, encoding: bytes | None = b"json/plain") -> RawValue:
    metadata = {} if encoding is None else {"encoding": encoding}
    return RawValue(Payload(metadata=metadata, data=data))


_RAW_PAYLOADS: tuple[RawValue, ...] = (
    _raw(b"\xff\xfe" + CANARY.encode()),
    _raw(deep_json(5000)),
    _raw(b'{"generation_id":"g","input":NaN}'),
    _raw(b'{"generation_id":"g","max_tool_rounds":1e999}'),
    _raw(b'{"generation_id":"g","max_tool_rounds":' + b"9" * 5000 + b"}"),
    _raw(b'{"generation_id":"a","generation_id":"b/..%2F","input":"x"}'),
    _raw(b'{"generation_id":"g\\ud800' + CANARY.encode() + b'"}'),
    _raw(b'{"generation_id":"g","input":"\x00' + CANARY.encode() + b'"}'),
    _raw(b"[1,2,3]"),
    _raw(b'"' + CANARY.encode() + b'"'),
    _raw(b"null"),
    _raw(b""),
    _raw(b'{"generation_id":"g"}', b"binary/plain"),
    _raw(b"\x00\x01" + CANARY.encode(), b"binary/null"),
    _raw(b'{"generation_id":"g"}', b"json/protobuf"),
    _raw(b'{"generation_id":"g"}', None),
    _raw(b'{"generation_id":"g","input":"' + b"y" * (2 * MEGABYTE + 16) + b'"}'),
    _raw(b'{"generation_id":"g","input":' + json.dumps(CANARY * 1000).encode() + b"}"),
)


async def test_every_field_with_a_huge_list_ends_typed_with_a_small_message(
    client: Client, running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    # One defect repeated 10^5 times must be named once: the failure message is written
    # into history and must stay far below Temporal's payload limits.
    outcomes: dict[str, int] = {}
    for path in _PATHS:
        payload = _mutated(_base("ManagedGenerationWorkflow", "big"), path, [0] * 100_000)
        outcome = await _run_hostile(
            client, running_worker, pool, "ManagedGenerationWorkflow", payload
        )
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"\nhuge-list outcomes: {dict(sorted(outcomes.items()))}")


async def test_raw_payloads_and_argument_counts_end_typed(
    client: Client, running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    outcomes: dict[str, int] = {}
    for workflow in WORKFLOWS:
        for raw in _RAW_PAYLOADS:
            outcome = await _run_hostile(client, running_worker, pool, workflow, raw)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        # No argument at all, and two arguments where one is expected.
        for args in (
            (),
            (_base(workflow, "a"), _base(workflow, "b")),
            (_base(workflow, "a"), _raw(b"\xff\xfe")),
            (_raw(b"{}", b"binary/unknown"), _raw(b"[")),
        ):
            outcome = await _run_hostile(client, running_worker, pool, workflow, *args)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # NaN is not JSON: refused at once, not passed on to become a silent null.
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        _raw(b'{"generation_id":"nan","input":{"message":"hi","x":NaN}}'),
        id=f"crux/hostile/{uuid.uuid4().hex}",
        task_queue=running_worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await handle.result()
    assert "NaN or infinity" in str(raised.value.cause)
    print(f"\nraw-payload outcomes: {dict(sorted(outcomes.items()))}")
    await ordinary_generation_still_completes(running_worker)


async def test_a_refused_request_leaves_its_generation_id_free(
    client: Client, running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    # Refused after the worker claimed the id (no input to render): nothing stays behind,
    # so the corrected request with the same idempotency key runs instead of conflicting.
    before = await table_digest(pool)
    refused = {"generation_id": "fix-me", "thread_id": "hostile-fix", "input": None}
    workflow_id = workflow_id_for("fix-me", "hostile-fix")
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow", refused, id=workflow_id, task_queue=running_worker.task_queue
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await handle.result()
    assert isinstance(raised.value.cause, ApplicationError)
    assert raised.value.cause.type == ErrorType.CONFIGURATION
    assert await table_digest(pool) == before
    corrected = {**refused, "input": "hello"}
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow", corrected, id=workflow_id, task_queue=running_worker.task_queue
    )
    await handle.result()
    view = await ThreadStore(pool).read_history_view("hostile-fix")
    assert [m.role for m in view.messages] == ["user", "assistant"]


async def test_an_unregistered_owner_is_refused_before_any_provider_call(
    running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    runtime = running_worker.runtime
    await runtime.generate("first", thread="hostile-owner", generation_id="o1")
    receipts = await pool.fetchval("SELECT count(*) FROM crux_request_receipts")
    with pytest.raises(ThreadError) as raised:
        await runtime.generate(
            "second", thread="hostile-owner", owner="reviewer", generation_id="o2"
        )
    assert raised.value.code == "invalid_message"
    # Nothing was planned or sent for a turn no commit could publish.
    assert await pool.fetchval("SELECT count(*) FROM crux_request_receipts") == receipts
    await ThreadStore(pool).register_owner("hostile-owner", "reviewer")
    generation = await runtime.generate(
        "second", thread="hostile-owner", owner="reviewer", generation_id="o2"
    )
    assert generation.text
