"""Human approval of tool calls: approve, deny, time out, survive a worker restart."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

import crux
from contracts.approvals import PendingApproval
from crux import cli
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import ThreadStore
from tests.helpers import eventually, new_worker, record_history, settings_for
from vocabulary.errors import ConfigurationError
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o"
SECRET = "transfer-to-account-9731"
SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


def _payment_tool(calls: list[dict[str, Any]]) -> crux.Tool:
    def pay(arguments: dict[str, Any]) -> str:
        calls.append(arguments)
        return "paid"

    return crux.tool("pay", pay, parameters=SCHEMA, requires_approval=True)


async def _awaiting(runtime: Runtime, generation_id: str, thread: str) -> list[PendingApproval]:
    async def probe() -> list[PendingApproval]:
        try:
            return await runtime.pending_approvals(generation_id, thread=thread)
        except Exception:
            return []

    return await eventually(probe, lambda pending: len(pending) > 0)


async def _stage_and_details(handle: WorkflowHandle[Any, Any]) -> tuple[str, str]:
    stage = await handle.query("get_stage", result_type=str)
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return stage, metadata.current_details


async def test_approved_call_runs_once_and_the_turn_commits(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    thread_id = f"approve:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": SECRET}, id="call_a1")),
        TextReply(text="Done."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        prompt = crux.prompt(id="payments", use=[tool])
        run = asyncio.create_task(
            runtime.generate(
                prompt, input="pay", thread=thread_id, model=MODEL, generation_id="ap1"
            )
        )
        pending = await _awaiting(runtime, "ap1", thread_id)
        assert pending == [PendingApproval(call_id="call_a1", tool="pay")]
        handle = client.get_workflow_handle(workflow_id_for("ap1", thread_id))
        stage, details = await _stage_and_details(handle)
        assert stage == "awaiting_approval"
        assert "pay" in details and "call_a1" in details and SECRET not in details

        async def attribute() -> object:
            described = await handle.describe()
            return {k.name: v for k, v in described.typed_search_attributes}.get("CruxStage")

        await eventually(attribute, lambda value: value == "awaiting_approval")
        assert calls == []
        with pytest.raises(ConfigurationError):
            await runtime.approve("call_unknown", "ap1", thread=thread_id)
        await runtime.approve("call_a1", "ap1", thread=thread_id)
        result = await asyncio.wait_for(run, 30)
        with pytest.raises(ConfigurationError):
            await runtime.approve("call_a1", "ap1", thread=thread_id)
    assert calls == [{"to": SECRET}]
    assert result.text == "Done."
    assert result.thread_commit is not None
    messages = await ThreadStore(pool).load_messages(thread_id, result.thread_commit.message_ids)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].text == "paid"
    history = await handle.fetch_history()
    # The arguments stay in PostgreSQL: no history event carries them.
    assert SECRET not in history.to_json()
    await record_history(client, handle.id, "approval_approved")


async def test_denied_call_never_runs_and_the_model_sees_the_denial(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    thread_id = f"deny:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="pay", arguments={"to": SECRET}, id="call_d1"),
            ScriptedToolCall(name="pay", arguments={"to": "x"}, id="call_d2"),
        ),
        TextReply(text="I was not allowed to pay."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        prompt = crux.prompt(id="payments", use=[tool])
        run = asyncio.create_task(
            runtime.generate(
                prompt, input="pay", thread=thread_id, model=MODEL, generation_id="dn1"
            )
        )
        pending = await _awaiting(runtime, "dn1", thread_id)
        # Both calls of the round wait, each for its own decision.
        assert [p.call_id for p in pending] == ["call_d1", "call_d2"]
        with pytest.raises(ConfigurationError):
            await runtime.deny("call_d1", "dn1", thread=thread_id, reason_code="Not Allowed!")
        await runtime.deny("call_d2", "dn1", thread=thread_id)
        await runtime.deny("call_d1", "dn1", thread=thread_id, reason_code="policy")
        result = await asyncio.wait_for(run, 30)
    assert calls == []
    assert result.text == "I was not allowed to pay."
    second = openai_server.requests[1].body["messages"]
    tool_messages = [m for m in second if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [
        {"error": "denied", "reason": "policy"},
        {"error": "denied", "reason": "denied"},
    ]
    assert result.thread_commit is not None
    assert len(result.thread_commit.message_ids) == 5
    handle = client.get_workflow_handle(workflow_id_for("dn1", thread_id))
    await record_history(client, handle.id, "approval_denied")


async def test_a_call_without_a_decision_in_time_is_denied_with_timeout(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    thread_id = f"late:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": "x"}, id="call_t1")),
        TextReply(text="Nobody answered."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        result = await worker.runtime.generate(
            crux.prompt(id="payments", use=[tool]),
            input="pay",
            thread=thread_id,
            model=MODEL,
            generation_id="to1",
            approval_timeout_seconds=1,
        )
    assert calls == []
    assert result.text == "Nobody answered."
    tool_message = openai_server.requests[1].body["messages"][-1]
    assert json.loads(tool_message["content"]) == {"error": "denied", "reason": "timeout"}
    await record_history(client, workflow_id_for("to1", thread_id), "approval_timeout")


async def test_a_run_awaiting_approval_survives_a_worker_restart(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    task_queue = f"crux-approval-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url).model_copy(
        update={"task_queue": task_queue}
    )
    thread_id = f"restart:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": "x"}, id="call_r1")),
        TextReply(text="Paid after the restart."),
    )
    runtime = Runtime(client, pool, task_queue=task_queue)
    prompt = crux.prompt(id="payments", use=[tool])
    async with (
        worker_resources(settings, pool=pool, tools=[tool]) as activities,
        build_worker(client, task_queue=task_queue, activities=activities),
    ):
        run = asyncio.create_task(
            runtime.generate(
                prompt, input="pay", thread=thread_id, model=MODEL, generation_id="rs1"
            )
        )
        await _awaiting(runtime, "rs1", thread_id)
    # The first worker is gone while the run waits; a second one picks it up.
    async with (
        worker_resources(settings, pool=pool, tools=[tool]) as activities,
        build_worker(client, task_queue=task_queue, activities=activities),
    ):
        await runtime.approve("call_r1", "rs1", thread=thread_id)
        result = await asyncio.wait_for(run, 30)
    assert calls == [{"to": "x"}]
    assert result.text == "Paid after the restart."
    assert len(openai_server.requests) == 2


async def test_the_cli_lists_approves_and_denies_pending_calls(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    thread_id = f"cli:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="pay", arguments={"to": SECRET}, id="call_c1"),
            ScriptedToolCall(name="pay", arguments={"to": "y"}, id="call_c2"),
        ),
        TextReply(text="One paid."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url).model_copy(
        update={"temporal_address": client.service_client.config.target_host}
    )
    parser = cli._parser()
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        run = asyncio.create_task(
            worker.runtime.generate(
                crux.prompt(id="payments", use=[tool]),
                input="pay",
                thread=thread_id,
                model=MODEL,
                generation_id="cl1",
            )
        )
        await _awaiting(worker.runtime, "cl1", thread_id)
        capsys.readouterr()
        for argv in (
            ["generation", "pending", "cl1", "--thread", thread_id],
            ["generation", "deny", "cl1", "call_c1", "--thread", thread_id, "--reason", "limit"],
            ["generation", "approve", "cl1", "call_c2", "--thread", thread_id],
        ):
            assert await cli.dispatch(parser.parse_args(argv), settings) == 0
        result = await asyncio.wait_for(run, 30)
    captured = capsys.readouterr()
    # Worker log lines share the output; the commands' own lines are told apart.
    printed = captured.out.splitlines()
    assert [json.loads(line) for line in printed if line.startswith("{")] == [
        {"call_id": "call_c1", "tool": "pay"},
        {"call_id": "call_c2", "tool": "pay"},
    ]
    decided = [line for line in printed if line.startswith(("denied ", "approved "))]
    assert decided == ["denied call_c1", "approved call_c2"]
    # Neither the commands nor the worker's logs show the arguments.
    assert SECRET not in captured.out + captured.err
    assert calls == [{"to": "y"}]
    assert result.text == "One paid."


async def test_a_tool_declared_with_approval_on_the_worker_waits_whatever_the_input_says(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    registered = _payment_tool(calls)
    # The caller's copy of the tool does not ask for approval: the worker's declaration wins.
    offered = crux.tool("pay", lambda _: "never here", parameters=SCHEMA)
    thread_id = f"declared:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": SECRET}, id="call_w1")),
        TextReply(text="Refused by the operator."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[registered]) as worker:
        runtime = worker.runtime
        run = asyncio.ensure_future(
            runtime.generate(
                crux.prompt(id="pay-undeclared", use=[offered]),
                input="Pay it",
                thread=thread_id,
                model="openai:gpt-4o",
                generation_id="declared-1",
            )
        )
        [pending] = await _awaiting(runtime, "declared-1", thread_id)
        assert pending.call_id == "call_w1"
        await runtime.deny(
            "call_w1", generation_id="declared-1", thread=thread_id, reason_code="operator"
        )
        result = await asyncio.wait_for(run, 30)
    assert calls == []
    assert result.text == "Refused by the operator."
    tool_message = openai_server.requests[1].body["messages"][-1]
    assert json.loads(tool_message["content"])["reason"] == "operator"


async def test_raw_updates_are_refused_by_the_validators_and_a_streamed_run_still_commits(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _payment_tool(calls)
    thread_id = f"raw:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": "s"}, id="call_s1")),
        TextReply(text="Streamed after approval."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime

        async def consume() -> list[crux.StreamUpdate]:
            return [
                update
                async for update in runtime.stream(
                    crux.prompt(id="pay-stream", use=[tool]),
                    input="Pay it",
                    thread=thread_id,
                    model="openai:gpt-4o",
                    generation_id="raw-1",
                )
            ]

        run = asyncio.ensure_future(consume())
        [pending] = await _awaiting(runtime, "raw-1", thread_id)
        handle = client.get_workflow_handle(workflow_id_for("raw-1", thread_id))
        # Plain Temporal clients meet the workflow's own validation: refused, and the run
        # keeps waiting (no failing workflow task).
        for update, payload in (
            ("deny", {"call_id": "call_s1", "reason_code": "Free text!"}),
            ("approve", {"call_id": "call_nope"}),
            ("approve", {"call_id": 42}),
            ("approve", "call_s1"),
        ):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update(update, payload)
        assert await handle.query("get_stage") == "awaiting_approval"
        assert calls == []
        await runtime.approve(pending.call_id, generation_id="raw-1", thread=thread_id)
        updates = await asyncio.wait_for(run, 30)
    final = updates[-1]
    assert isinstance(final, crux.StreamCommitted)
    assert final.generation.text == "Streamed after approval."
    assert calls == [{"to": "s"}]
