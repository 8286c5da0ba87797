"""`Runtime.parallel` on the real stack: members as child workflows of one parallel run.

One member's failure is that member's typed error and never costs another member its
committed turn; the same parallel id runs again without committing anything twice; members
on one Thread each publish their own turn; cancelling the run cancels its children.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

import crux
from crux.errors import (
    GenerationFailedError,
    ProviderHTTPError,
    RequestCompositionError,
    ThreadError,
)
from providers.loopback import (
    CountReply,
    ErrorReply,
    LoopbackOpenAIServer,
    RecordedRequest,
    TextReply,
)
from providers.loopback._replies import Reply
from providers.loopback._shared import input_tokens_of
from storage import ThreadStore
from tests.helpers import eventually, new_worker, settings_for
from vocabulary.ids import (
    parallel_member_generation_id,
    parallel_member_workflow_id,
    parallel_workflow_id,
)

MODEL = "openai:gpt-4o-mini"
QUESTION = "Can I change my plan before the renewal date?"

support = crux.prompt(id="support", prompt=lambda i: f"support desk: {i['message']}")
billing = crux.prompt(id="billing", prompt=lambda i: f"billing desk: {i['message']}")
sales = crux.prompt(id="sales", prompt=lambda i: f"sales desk: {i['message']}")


def _desk(request: RecordedRequest) -> str:
    body = json.dumps(request.body)
    for desk in ("support", "billing", "sales"):
        if f"{desk} desk" in body:
            return desk
    return "other"


def _responder(delay: float) -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        if not request.path.endswith("/chat/completions"):
            return CountReply(input_tokens=input_tokens_of(request.body))
        desk = _desk(request)
        if desk == "billing":
            return ErrorReply(status=400, message="the billing desk is closed")
        return TextReply(text=f"answer from the {desk} desk", delay_seconds=delay)

    return respond


@pytest_asyncio.fixture
async def desks() -> AsyncIterator[LoopbackOpenAIServer]:
    """A loopback provider: the billing desk always fails with 400, the others answer."""
    async with LoopbackOpenAIServer(responder=_responder(0.3)) as server:
        yield server


async def _thread_rows(pool: asyncpg.Pool, thread_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT message_id FROM crux_thread_messages WHERE thread_id = $1 ORDER BY message_id",
        thread_id,
    )
    return [row["message_id"] for row in rows]


async def test_one_member_failing_keeps_the_others_turn_and_a_rerun_commits_nothing_twice(
    client: Client, pool: asyncpg.Pool, database_url: str, desks: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=desks.base_url)
    suffix = uuid.uuid4().hex[:6]
    support_thread, billing_thread = f"support:{suffix}", f"billing:{suffix}"
    parallel_id = f"support-turn-{suffix}"
    async with new_worker(client, pool, settings) as worker:
        run = await worker.runtime.parallel(
            id=parallel_id,
            context={"message": QUESTION},
            agents={"support": support, "billing": billing},
            threads={"support": support_thread, "billing": billing_thread},
            model=MODEL,
            settings={"temperature": 0.2},
        )
        assert set(run.results) == {"support", "billing"}
        error = run.errors["billing"]
        assert isinstance(error, ProviderHTTPError)
        assert error.status == 400
        answer = run["support"]
        assert answer.text == "answer from the support desk"
        commit = answer.thread_commit
        assert commit is not None and commit.status == "selected"
        generation_id = parallel_member_generation_id(parallel_id, "support")
        assert answer.generation_id == generation_id
        assert list(commit.message_ids) == [
            f"gen:{generation_id}:user",
            f"gen:{generation_id}:assistant",
        ]
        assert len(answer.steps) == 1
        receipt = await worker.runtime.receipt(answer.steps[0].request.id)
        assert receipt == answer.steps[0].request
        with pytest.raises(ProviderHTTPError):
            run["billing"]
        first_rows = await _thread_rows(pool, support_thread)
        assert sorted(first_rows) == sorted(commit.message_ids)
        assert await _thread_rows(pool, billing_thread) == []

        # Each member ran as its own child under the parent's id.
        child = client.get_workflow_handle(parallel_member_workflow_id(parallel_id, "support"))
        assert (await child.describe()).status == WorkflowExecutionStatus.COMPLETED
        failed = client.get_workflow_handle(parallel_member_workflow_id(parallel_id, "billing"))
        assert (await failed.describe()).status == WorkflowExecutionStatus.FAILED
        ledger = await pool.fetch("SELECT workflow_id FROM crux_generations")
        assert [row["workflow_id"] for row in ledger] == [child.id]
        parent = client.get_workflow_handle(parallel_workflow_id(parallel_id))
        assert run.workflow_id == parent.id
        history = (await parent.fetch_history()).to_json()
        assert QUESTION not in history and "support desk" not in history
        assert "answer from" not in history and "desk is closed" not in history
        support_calls = sum(1 for r in desks.requests if _desk(r) == "support")
        # The member's call was built like `generate`'s: the call's settings reached the wire.
        [sent] = [
            r for r in desks.requests if _desk(r) == "support" and r.path.endswith("/completions")
        ]
        assert sent.body["temperature"] == 0.2

        again = await worker.runtime.parallel(
            id=parallel_id,
            context={"message": QUESTION},
            agents={"support": support, "billing": billing},
            threads={"support": support_thread, "billing": billing_thread},
            model=MODEL,
            settings={"temperature": 0.2},
        )
        # The same id asked with other content is refused before anything runs.
        with pytest.raises(ThreadError) as conflict:
            await worker.runtime.parallel(
                id=parallel_id,
                context={"message": "Something else entirely"},
                agents={"support": support, "billing": billing},
                threads={"support": support_thread, "billing": billing_thread},
                model=MODEL,
            )
        assert conflict.value.code == "identity_conflict"
    replayed = again["support"]
    assert replayed.result.replayed
    assert replayed.text == answer.text
    assert replayed.thread_commit is not None
    assert replayed.thread_commit.message_ids == commit.message_ids
    assert [s.request.id for s in replayed.steps] == [s.request.id for s in answer.steps]
    assert isinstance(again.errors["billing"], ProviderHTTPError)
    assert sum(1 for r in desks.requests if _desk(r) == "support") == support_calls
    assert await _thread_rows(pool, support_thread) == first_rows
    assert await _thread_rows(pool, billing_thread) == []


async def test_a_member_that_cannot_fit_fails_typed_before_any_provider_call(
    client: Client, pool: asyncpg.Pool, database_url: str, desks: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=desks.base_url)
    tight = crux.prompt(
        id="tight", prompt=lambda i: f"sales desk: {i['message']}", input_budget={"max": 3}
    )
    thread_id = f"tight:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        run = await worker.runtime.parallel(
            id=f"tight-{uuid.uuid4().hex[:6]}",
            context={"message": QUESTION},
            agents={"tight": tight, "support": support},
            thread=thread_id,
            model=MODEL,
        )
    error = run.errors["tight"]
    assert isinstance(error, RequestCompositionError)
    assert error.code == "REQUEST_TOO_LARGE"
    # The provider may have counted its tokens; it was never asked for an answer.
    sent = [r for r in desks.requests if r.path.endswith("/chat/completions")]
    assert not any(_desk(r) == "sales" for r in sent)
    assert run["support"].thread_commit is not None


async def test_three_members_in_flight_on_one_thread_each_commit_their_own_turn(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"shared:{uuid.uuid4().hex[:6]}"
    parallel_id = f"shared-{uuid.uuid4().hex[:6]}"
    async with LoopbackOpenAIServer(
        responder=lambda _r: TextReply(text="ok", delay_seconds=1.0)
    ) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            agents = {
                "first": crux.prompt(id="first", prompt=lambda i: f"first: {i}"),
                "second": crux.prompt(id="second", prompt=lambda i: f"second: {i}"),
                "third": crux.prompt(id="third", prompt=lambda i: f"third: {i}"),
            }
            run = await worker.runtime.parallel(
                id=parallel_id,
                context="Which plan fits?",
                agents=agents,
                thread=thread_id,
                model=MODEL,
            )
            # All three were in flight at once: each provider call overlapped the others.
            assert len(server.requests) == 3
    assert not run.errors
    commits = [run[name].thread_commit for name in ("first", "second", "third")]
    assert all(c is not None for c in commits)
    ids = [m for c in commits if c is not None for m in c.message_ids]
    assert len(set(ids)) == 6
    assert sorted(await _thread_rows(pool, thread_id)) == sorted(ids)
    statuses = sorted(c.status for c in commits if c is not None)
    # The first publication advanced the head; the others published beside it.
    assert statuses == ["alternative", "alternative", "selected"]
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 2


async def test_cancelling_the_parallel_run_cancels_its_children(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"cancel:{uuid.uuid4().hex[:6]}"
    parallel_id = f"cancel-{uuid.uuid4().hex[:6]}"
    async with LoopbackOpenAIServer(
        responder=lambda _r: TextReply(text="late", delay_seconds=20.0)
    ) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            call = asyncio.ensure_future(
                worker.runtime.parallel(
                    id=parallel_id,
                    context={"message": "hello"},
                    agents={"a": support, "b": sales},
                    thread=thread_id,
                    model=MODEL,
                )
            )

            async def requests() -> int:
                return len(server.requests)

            await eventually(requests, lambda n: n == 2)
            parent = client.get_workflow_handle(parallel_workflow_id(parallel_id))
            states = await parent.query("get_members", result_type=dict[str, str])
            assert states == {"a": "running", "b": "running"}
            await parent.cancel()
            with pytest.raises(GenerationFailedError) as failure:
                await call
            assert failure.value.reason == "cancelled"
            for member in ("a", "b"):
                child = client.get_workflow_handle(parallel_member_workflow_id(parallel_id, member))

                async def status(child: WorkflowHandle[Any, Any] = child) -> object:
                    return (await child.describe()).status

                await eventually(status, lambda s: s == WorkflowExecutionStatus.CANCELED)
    assert await _thread_rows(pool, thread_id) == []


async def test_bad_parallel_input_fails_typed_before_anything_runs(
    client: Client, pool: asyncpg.Pool, database_url: str, desks: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=desks.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        bad: list[dict[str, Any]] = [
            {"id": "", "agents": {"a": support}},
            {"id": "x\x00y", "agents": {"a": support}},
            {"id": "ok", "agents": {}},
            {"id": "ok", "agents": {"a" * 65: support}},
            {"id": "ok", "agents": {"a": support}, "threads": {"b": "t"}},
            {"id": "ok", "agents": {"a": object()}},
            {"id": "ok", "agents": {"a": support}, "input_budget": {"max": 0}},
        ]
        for arguments in bad:
            with pytest.raises(crux.ConfigurationError):
                await runtime.parallel(context={"message": "hi"}, model=MODEL, **arguments)
        staged = await pool.fetchval("SELECT count(*) FROM crux_generation_staging")
        assert staged == 0
        # A plain Temporal client's invalid input fails the run typed and promptly.
        with pytest.raises(WorkflowFailureError) as failure:
            await client.execute_workflow(
                "ParallelGenerationWorkflow",
                {"parallel_id": "raw", "members": [], "secret": "do not echo"},
                id=f"crux/parallel/raw-{uuid.uuid4().hex[:6]}",
                task_queue=worker.task_queue,
            )
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ConfigurationError"
    assert "do not echo" not in cause.message and "secret" not in cause.message


async def test_ad_hoc_members_run_at_once_without_a_thread(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = settings_for(database_url)
    names = [f"member-{index}" for index in range(8)]
    parallel_id = f"adhoc-{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        loop = asyncio.get_running_loop()
        started = loop.time()
        run = await worker.runtime.parallel(
            id=parallel_id,
            context="echo this back",
            agents={name: crux.prompt(id=name, prompt=lambda i: f"{i}") for name in names},
            model="offline:echo",
        )
        elapsed = loop.time() - started
    assert list(run.results) == names
    assert not run.errors
    for name in names:
        generation = run[name]
        assert generation.thread_commit is None
        assert generation.result.history_source == "none"
        assert generation.text
    history = await client.get_workflow_handle(parallel_workflow_id(parallel_id)).fetch_history()
    # Every child starts in the first workflow task; the parent's history grows by a
    # handful of events per member and holds no text.
    assert len(history.events) <= 6 * len(names) + 8
    assert "echo this back" not in history.to_json()
    print(f"parallel: {len(names)} ad-hoc members in {elapsed:.2f}s, {len(history.events)} events")
