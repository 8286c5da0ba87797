"""Generation identity, unambiguous workflow ids, unstorable text and typed provider errors.

End to end through `Runtime` and through a plain Temporal client, on the real dev server,
PostgreSQL and a loopback HTTP provider.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

import crux
from crux.models import HistorySpec, workflow_id_for
from providers.loopback import ErrorReply, LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import RunningWorker, new_worker, settings_for
from vocabulary.details import decode_details

pytestmark = pytest.mark.durability

MODEL = "openai:gpt-4o-mini"
SECRET = "body-text-that-must-never-surface"


@pytest.fixture
async def worker(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> Any:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as running:
        yield running


def _thread(prefix: str) -> str:
    return f"{prefix}:{uuid.uuid4().hex[:6]}"


async def _staged_rows(pool: asyncpg.Pool, thread_id: str) -> int:
    return await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE thread_id = $1", thread_id
    )


def _failure_cause(failure: WorkflowFailureError) -> ApplicationError:
    cause = failure.cause
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError)
    return cause


# --- Generation ids are scoped to their Thread --------------------------------------------


async def test_same_generation_id_on_another_thread_is_a_new_generation(
    worker: RunningWorker, openai_server: LoopbackOpenAIServer
) -> None:
    customer_a, customer_b = _thread("customer-A"), _thread("customer-B")
    openai_server.enqueue(TextReply(text="reply for A"), TextReply(text="reply for B"))
    first = await worker.runtime.generate(
        "hello", thread=customer_a, model=MODEL, generation_id="msg-1"
    )
    second = await worker.runtime.generate(
        "hello", thread=customer_b, model=MODEL, generation_id="msg-1"
    )
    adhoc = await worker.runtime.generate("hello", model="offline:echo", generation_id="msg-1")
    assert (first.text, second.text) == ("reply for A", "reply for B")
    assert not second.result.replayed and not adhoc.result.replayed
    assert second.thread_commit is not None and second.thread_commit.status == "selected"
    assert len(openai_server.requests) == 2


async def test_reused_id_with_other_content_is_an_identity_conflict(
    worker: RunningWorker, openai_server: LoopbackOpenAIServer, pool: asyncpg.Pool
) -> None:
    thread_id = _thread("conflict")
    openai_server.enqueue(TextReply(text="first"))
    first = await worker.runtime.generate(
        "question one", thread=thread_id, model=MODEL, generation_id="g"
    )
    with pytest.raises(crux.ThreadError) as raised:
        await worker.runtime.generate(
            "question two", thread=thread_id, model=MODEL, generation_id="g"
        )
    assert raised.value.code == "identity_conflict"
    with pytest.raises(crux.ThreadError):
        await worker.runtime.generate(
            "question one", thread=thread_id, model="offline:echo", generation_id="g"
        )
    replay = await worker.runtime.generate(
        "question one", thread=thread_id, model=MODEL, generation_id="g"
    )
    assert replay.text == first.text == "first"
    assert replay.result.replayed
    assert replay.thread_commit is not None and replay.thread_commit.replayed
    assert first.thread_commit is not None and not first.thread_commit.replayed
    assert len(openai_server.requests) == 1
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 2


async def test_concurrent_reuse_with_other_content_never_attaches_to_the_first(
    worker: RunningWorker, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = _thread("inflight")
    openai_server.enqueue(TextReply(text="only reply"))
    outcomes = await asyncio.gather(
        worker.runtime.generate("one", thread=thread_id, model=MODEL, generation_id="same"),
        worker.runtime.generate("two", thread=thread_id, model=MODEL, generation_id="same"),
        return_exceptions=True,
    )
    conflicts = [o for o in outcomes if isinstance(o, crux.ThreadError)]
    answers = [o for o in outcomes if isinstance(o, crux.Generation)]
    assert len(conflicts) == 1 and conflicts[0].code == "identity_conflict"
    assert [a.text for a in answers] == ["only reply"]
    assert len(openai_server.requests) == 1


async def test_plain_client_reusing_an_id_with_other_input_is_refused(
    client: Client, worker: RunningWorker, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = _thread("plain-conflict")
    openai_server.enqueue(TextReply(text="plain reply"))

    async def start(text: str) -> Any:
        return await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": "p1", "thread_id": thread_id, "model": MODEL, "input": text},
            id=workflow_id_for("p1", thread_id),
            task_queue=worker.task_queue,
        )

    first = await start("Hi there")
    again = await start("Hi there")
    assert again["replayed"] is True and again["thread_commit"]["replayed"] is True
    assert first["thread_commit"]["replayed"] is False
    with pytest.raises(WorkflowFailureError) as raised:
        await start("Something else")
    cause = _failure_cause(raised.value)
    assert (cause.type, decode_details(cause.details).code) == ("ThreadError", "identity_conflict")
    assert len(openai_server.requests) == 1


# --- Workflow ids are unambiguous ---------------------------------------------------------


async def test_slashes_in_thread_and_generation_ids_never_collide(
    worker: RunningWorker, openai_server: LoopbackOpenAIServer
) -> None:
    base = _thread("X")
    assert workflow_id_for("y", f"{base}/x") != workflow_id_for("x/y", base)
    assert workflow_id_for("y", None) != workflow_id_for("y", "adhoc")
    openai_server.enqueue(TextReply(text="one"), TextReply(text="two"))
    one, two = await asyncio.gather(
        worker.runtime.generate("q", thread=f"{base}/x", model=MODEL, generation_id="y"),
        worker.runtime.generate("q", thread=base, model=MODEL, generation_id="x/y"),
    )
    assert sorted([one.text, two.text]) == ["one", "two"]
    assert one.result.thread_id == f"{base}/x" and two.result.thread_id == base


async def test_overlong_ids_are_refused_before_anything_is_staged(
    worker: RunningWorker, pool: asyncpg.Pool, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = _thread("long")
    for generation_id in ["g" * 2_000, "", " padded", "bad\x00id"]:
        with pytest.raises(crux.ConfigurationError) as raised:
            await worker.runtime.generate("hi", thread=thread_id, generation_id=generation_id)
        assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)
    # Each id fits alone but the encoded workflow id would exceed Temporal's limit.
    with pytest.raises(crux.ConfigurationError):
        await worker.runtime.generate("hi", thread="t" * 500, generation_id="\u00e9" * 200)
    assert await _staged_rows(pool, thread_id) == 0
    assert openai_server.requests == []


# --- No input wedges a run ----------------------------------------------------------------

INVALID_SETTINGS: list[dict[str, Any]] = [
    {"input_budget": {"optimize_at": 300, "max": 200}},
    {"input_budget": {"max": 0}},
    {"input_budget": {"max": -5}},
    {"max_output_tokens": -5},
    {"max_output_tokens": 0},
    {"history": {"kind": "recent", "messages": -3}},
    {"history": {"kind": "recent", "messages": 0}},
    {"max_output_tokens": 2**70},
    {"max_tool_rounds": -1},
    {"model": "no-provider"},
]


@pytest.mark.parametrize("bad", INVALID_SETTINGS, ids=lambda s: next(iter(s)))
async def test_runtime_refuses_invalid_settings_before_starting(
    worker: RunningWorker, pool: asyncpg.Pool, bad: dict[str, Any]
) -> None:
    thread_id = _thread("invalid")
    arguments = dict(bad)
    if "history" in arguments:
        # Built unchecked, as a careless builder would: the facade validates it again.
        arguments["history"] = HistorySpec.model_construct(**arguments["history"])
    with pytest.raises(crux.ConfigurationError) as raised:
        await worker.runtime.generate("hi", thread=thread_id, **arguments)
    assert isinstance(raised.value, TypeError)
    if "model" in bad:
        # A model id is named, with the known models (whose names hold figures like -5).
        assert raised.value.code == "unknown_model"
    else:
        assert "-5" not in str(raised.value) and "300" not in str(raised.value)
    assert await _staged_rows(pool, thread_id) == 0


async def test_stream_and_preview_refuse_invalid_settings_too(
    worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    thread_id = _thread("invalid-stream")
    with pytest.raises(crux.ConfigurationError):
        async for _ in worker.runtime.stream(
            "hi", thread=thread_id, input_budget={"optimize_at": 9, "max": 3}
        ):
            pass
    with pytest.raises(crux.ConfigurationError):
        await worker.runtime.preview("hi", thread=thread_id, max_output_tokens=-1)
    with pytest.raises(crux.ConfigurationError):
        await worker.runtime.generate("hi", thread=thread_id, input_budget=[1, 2])  # pyright: ignore[reportArgumentType]
    with pytest.raises(crux.ConfigurationError):
        await worker.runtime.generate(
            "hi", thread=thread_id, history=HistorySpec.model_construct(summary_model="x")
        )
    assert await _staged_rows(pool, thread_id) == 0


def _raw(data: bytes, encoding: bytes = b"json/plain") -> RawValue:
    return RawValue(Payload(metadata={"encoding": encoding}, data=data))


WIRE_INPUTS: list[tuple[str, object]] = [
    ("list", _raw(b'["g1", "thread"]')),
    ("string", _raw(b'"just a string"')),
    ("invalid-utf8", _raw(b'{"generation_id": "g\xff\xfe", "input": "x"}')),
    (
        "lone-surrogate",
        _raw(b'{"generation_id": "g1", "input": "a\\ud800b ' + SECRET.encode() + b'"}'),
    ),
    ("nul", _raw(b'{"generation_id": "g1", "input": "a\\u0000b"}')),
    ("deep", _raw(b'{"generation_id": "g1", "input": ' + b"[" * 5_000 + b"]" * 5_000 + b"}")),
    ("not-json", _raw(b"{not json " + SECRET.encode())),
    ("binary", _raw(b"\x00\x01", encoding=b"binary/plain")),
    ("optimize-over-max", {"generation_id": "g1", "input_budget": {"optimize_at": 9, "max": 3}}),
    ("zero-max", {"generation_id": "g1", "input_budget": {"max": 0}}),
    ("negative-output", {"generation_id": "g1", "max_output_tokens": -5}),
    ("negative-history", {"generation_id": "g1", "history": {"kind": "recent", "messages": -3}}),
    ("secret-key", {"generation_id": "g1", SECRET: 1}),
    ("secret-value", {"generation_id": "g1", "history": {"kind": SECRET}}),
]


@pytest.mark.parametrize(("name", "payload"), WIRE_INPUTS, ids=[n for n, _ in WIRE_INPUTS])
async def test_any_client_input_fails_the_workflow_promptly_and_typed(
    client: Client, worker: RunningWorker, name: str, payload: object
) -> None:
    started = time.monotonic()
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        payload,
        id=f"crux/gen/wire/{name}/{uuid.uuid4().hex}",
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(handle.result(), timeout=20)
    cause = _failure_cause(raised.value)
    assert cause.type == "ConfigurationError" and cause.non_retryable
    assert SECRET not in str(cause)
    assert time.monotonic() - started < 15
    history = (await handle.fetch_history()).to_json()
    assert "WorkflowTaskFailed" not in history and "WORKFLOW_TASK_FAILED" not in history


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    payload=st.one_of(
        st.binary(max_size=48).map(_raw),
        JSON_VALUES.filter(lambda v: not isinstance(v, dict)),
        st.dictionaries(st.sampled_from(["generation_id", "input_budget", "history"]), JSON_VALUES),
    )
)
async def test_arbitrary_payloads_never_wedge_the_workflow(
    client: Client, worker: RunningWorker, payload: object
) -> None:
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        payload,
        id=f"crux/gen/fuzz/{uuid.uuid4().hex}",
        task_queue=worker.task_queue,
    )
    try:
        await asyncio.wait_for(handle.result(), timeout=20)
    except WorkflowFailureError as failure:
        cause = _failure_cause(failure)
        assert cause.type in {"ConfigurationError", "ThreadError", "RequestCompositionError"}


async def test_summary_workflow_input_is_validated_too(
    client: Client, worker: RunningWorker
) -> None:
    handle = await client.start_workflow(
        "SummaryWorkflow",
        [SECRET],
        id=f"crux/summary/wire/{uuid.uuid4().hex}",
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(handle.result(), timeout=20)
    cause = _failure_cause(raised.value)
    assert cause.type == "ConfigurationError" and SECRET not in str(cause)


# --- Text PostgreSQL cannot store ---------------------------------------------------------


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["nul", "lone-surrogate"])
async def test_unstorable_input_is_refused_once_before_any_call(
    worker: RunningWorker, pool: asyncpg.Pool, openai_server: LoopbackOpenAIServer, bad: str
) -> None:
    thread_id = _thread("unstorable")
    with pytest.raises(crux.ThreadError) as raised:
        await worker.runtime.generate(bad, thread=thread_id, model=MODEL)
    assert raised.value.code == "invalid_message" and bad not in str(raised.value)
    with pytest.raises(crux.ThreadError):
        await worker.runtime.generate(
            crux.prompt(id="ctx", use=[crux.context(id="doc", content=bad)]),
            input="fine",
            thread=thread_id,
            model=MODEL,
        )
    with pytest.raises(crux.ThreadError):
        await worker.runtime.generate(
            "fine", messages=[{"role": "user", "content": bad}], model=MODEL
        )
    handle = crux.thread(id=thread_id, storage=pool)
    with pytest.raises(crux.ThreadError) as appended:
        await handle.append({"role": "user", "content": bad})
    assert not isinstance(appended.value, crux.ThreadCommitError)
    assert appended.value.code == "invalid_message"
    with pytest.raises(crux.ThreadError) as read:
        await handle.read(limit=10**20)
    assert read.value.code == "invalid_message"
    assert openai_server.requests == []
    assert await _staged_rows(pool, thread_id) == 0


async def test_unstorable_provider_reply_fails_typed_after_one_call(
    worker: RunningWorker, pool: asyncpg.Pool, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = _thread("reply-nul")
    openai_server.enqueue(*[TextReply(text="bad\x00reply")] * 5)
    with pytest.raises(crux.ThreadError) as raised:
        await worker.runtime.generate("hi", thread=thread_id, model=MODEL)
    assert raised.value.code == "invalid_message"
    assert len(openai_server.requests) == 1
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert view.messages == ()


async def test_unstorable_tool_result_fails_typed_after_one_run(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    from providers.loopback import ScriptedToolCall, tool_call_reply

    runs: list[dict[str, Any]] = []

    async def lookup(arguments: dict[str, Any]) -> str:
        runs.append(arguments)
        return "result with a \x00 byte"

    tool = crux.tool("lookup", lookup, description="Look up", parameters={"type": "object"})
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="lookup", arguments={})),
        TextReply(text="never reached"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as running:
        with pytest.raises(crux.ThreadError) as raised:
            await running.runtime.generate(
                crux.prompt(id="tools", use=[tool]), input="go", thread=_thread("tool"), model=MODEL
            )
    assert raised.value.code == "invalid_message"
    assert len(runs) == 1
    assert len(openai_server.requests) == 1


# --- Typed provider errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "remedy"),
    [(401, crux.ProviderAuthError, "OPENAI_API_KEY"), (404, crux.ProviderNotFoundError, MODEL)],
)
async def test_provider_rejections_reach_the_caller_typed_with_their_remedy(
    client: Client,
    worker: RunningWorker,
    openai_server: LoopbackOpenAIServer,
    status: int,
    kind: type[crux.ProviderError],
    remedy: str,
) -> None:
    openai_server.enqueue(ErrorReply(status=status, message=SECRET))
    with pytest.raises(crux.ProviderError) as raised:
        await worker.runtime.generate("hi", thread=_thread("auth"), model=MODEL)
    error = raised.value
    assert type(error) is kind
    assert (error.status, error.retryable, error.provider) == (status, False, "openai")
    assert error.model == MODEL and error.host == openai_server.base_url.split("/")[2]
    assert remedy in str(error) and str(error.host) in str(error)
    assert SECRET not in str(error) and error.__cause__ is None
    assert not isinstance(error, WorkflowFailureError)
    assert len(openai_server.requests) == 1
    # The same failure seen by a plain Temporal client: typed, non-retryable, content-free.
    openai_server.enqueue(ErrorReply(status=status, message=SECRET))
    plain_id = f"plain-provider-{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorkflowFailureError) as plain:
        await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": plain_id, "model": MODEL, "input": "hi"},
            id=workflow_id_for(plain_id, None),
            task_queue=worker.task_queue,
        )
    cause = _failure_cause(plain.value)
    assert cause.type == kind.__name__ and cause.non_retryable
    assert SECRET not in str(cause)


async def test_refused_connection_is_a_provider_unavailable_error(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    # Bound, never listening: connections are refused, and no other test can take the port.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        settings = settings_for(database_url, openai_base_url=f"http://127.0.0.1:{port}/v1")
        async with new_worker(client, pool, settings) as running:
            with pytest.raises(crux.ProviderError) as raised:
                # The default number of attempts, with short pauses between them.
                await running.runtime.generate(
                    "hi", model=MODEL, attempt_policy={"initial_interval_seconds": 0.1}
                )
    error = raised.value
    assert isinstance(error, crux.ProviderUnavailableError)
    assert error.retryable and error.status is None
    assert error.host == f"127.0.0.1:{port}" and error.model == MODEL
    assert "OPENAI_BASE_URL" in str(error)


def test_domain_errors_fail_the_workflows_not_their_tasks() -> None:
    from temporalio import workflow

    from workflows.generation import ManagedGenerationWorkflow
    from workflows.summary import SummaryWorkflow

    for defined in (ManagedGenerationWorkflow, SummaryWorkflow):
        definition = workflow._Definition.from_class(defined)
        assert definition is not None
        assert crux.CruxError in definition.failure_exception_types
