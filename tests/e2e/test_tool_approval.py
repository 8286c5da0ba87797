"""Human approval of tool calls: the run waits, visibly and content-free, for a decision.

Real worker, real Temporal dev server, real PostgreSQL, the loopback OpenAI server scripted
to call a tool that requires approval.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

import crux
from crux._approval_cli import run_approval_command
from crux.cli import _parser
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import ThreadStore
from tests.helpers import eventually, new_worker, settings_for
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o"
SECRET = "acct-4471-secret-destination"


def _transfer_tool(calls: list[dict[str, Any]]) -> crux.Tool:
    def transfer(arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments)
        return {"status": "sent"}

    return crux.tool(
        "transfer",
        transfer,
        description="Send money",
        parameters={"type": "object", "properties": {"to": {"type": "string"}}},
        requires_approval=True,
    )


async def _awaiting(runtime: Runtime, generation_id: str, thread_id: str) -> list[Any]:
    async def pending() -> list[crux.PendingApproval]:
        try:
            return await runtime.pending_approvals(generation_id, thread=thread_id)
        except crux.ApprovalError as error:
            if error.code != "not_found":
                raise
            return []  # not started yet

    return await eventually(pending, lambda found: len(found) > 0)


async def test_approved_call_runs_and_the_turn_commits(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _transfer_tool(calls)
    thread_id = f"approve:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="transfer", arguments={"to": SECRET}, id="call_a1")),
        TextReply(text="Sent."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        run = asyncio.ensure_future(
            runtime.generate(
                crux.prompt(id="pay", use=[tool]),
                input="Pay it",
                thread=thread_id,
                model=MODEL,
                generation_id="g1",
            )
        )
        [pending] = await _awaiting(runtime, "g1", thread_id)
        assert (pending.call_id, pending.tool_name, pending.tool_round) == (
            "call_a1",
            "transfer",
            1,
        )
        handle = client.get_workflow_handle(workflow_id_for("g1", thread_id))
        assert await handle.query("get_stage") == "awaiting_approval"
        described = await handle.describe()
        assert described.search_attributes.get("CruxStage") == ["awaiting_approval"]
        assert calls == []  # nothing ran before the decision
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert (
            metadata.current_details == "stage: awaiting_approval (round 1: transfer call call_a1)"
        )

        with pytest.raises(crux.ApprovalError) as unknown:
            await runtime.approve("call_nope", generation_id="g1", thread=thread_id)
        assert unknown.value.code == "unknown_call"
        with pytest.raises(crux.ApprovalError) as invalid:
            await runtime.deny("call_a1", "Free text!", generation_id="g1", thread=thread_id)
        assert invalid.value.code == "invalid_reason"

        # Plain Temporal clients meet the workflow's own validators: refused, typed, and
        # the run keeps waiting.
        with pytest.raises(WorkflowUpdateFailedError) as raw:
            await handle.execute_update("deny", args=["call_a1", "Free text!"])
        assert isinstance(raw.value.cause, ApplicationError)
        assert raw.value.cause.type == "ApprovalError"
        for bad in ([42], [["call_a1"]], []):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update("approve", args=bad)
        assert await handle.query("get_stage") == "awaiting_approval"

        await runtime.approve("call_a1", generation_id="g1", thread=thread_id)
        result = await asyncio.wait_for(run, 30)
        with pytest.raises(crux.ApprovalError) as closed:
            await runtime.approve("call_a1", generation_id="g1", thread=thread_id)
        assert closed.value.code in ("not_awaiting", "unknown_call")

    assert calls == [{"to": SECRET}]
    assert result.text == "Sent."
    commit = result.thread_commit
    assert commit is not None and len(commit.message_ids) == 4
    messages = await ThreadStore(pool).load_messages(thread_id, commit.message_ids)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(messages[2].text) == {"status": "sent"}
    history = await handle.fetch_history()
    assert SECRET not in history.to_json()


async def test_denied_call_never_runs_and_the_model_sees_the_denial(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _transfer_tool(calls)
    thread_id = f"deny:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="transfer", arguments={"to": SECRET}, id="call_d1"),
            ScriptedToolCall(name="transfer", arguments={"to": "other"}, id="call_d2"),
        ),
        TextReply(text="Both transfers were refused."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        run = asyncio.ensure_future(
            runtime.generate(
                crux.prompt(id="pay", use=[tool]),
                input="Pay both",
                thread=thread_id,
                model=MODEL,
                generation_id="g2",
            )
        )
        pending = await _awaiting(runtime, "g2", thread_id)
        # Both calls of the round wait for their own decision; the second is decided first.
        assert [p.call_id for p in pending] == ["call_d1", "call_d2"]
        # The operator's command line: list, then deny the second call without a reason.
        cli = settings.model_copy(
            update={"temporal_address": client.service_client.config.target_host}
        )
        await run_approval_command(
            _parser().parse_args(["generation", "pending", "g2", "--thread", thread_id]), cli
        )
        # (The in-process worker logs to the same stdout.)
        listed = [line for line in capsys.readouterr().out.splitlines() if "\t" in line]
        assert listed == ["call_d1\ttransfer\tround 1", "call_d2\ttransfer\tround 1"]
        await run_approval_command(
            _parser().parse_args(["generation", "deny", "g2", "call_d2", "--thread", thread_id]),
            cli,
        )
        assert "denied call_d2" in capsys.readouterr().out.splitlines()
        await runtime.deny("call_d1", "policy", generation_id="g2", thread=thread_id)
        result = await asyncio.wait_for(run, 30)

    assert calls == []
    assert result.text == "Both transfers were refused."
    second_request = openai_server.requests[1].body
    tool_messages = [m for m in second_request["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [
        {"error": "denied", "reason": "policy"},
        {"error": "denied"},
    ]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_d1", "call_d2"]
    commit = result.thread_commit
    assert commit is not None and len(commit.message_ids) == 5
    messages = await ThreadStore(pool).load_messages(thread_id, commit.message_ids)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_no_decision_in_time_is_a_denial_with_reason_timeout(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _transfer_tool(calls)
    thread_id = f"timeout:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="transfer", arguments={"to": SECRET}, id="call_t1")),
        TextReply(text="No approval came."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        result = await worker.runtime.generate(
            crux.prompt(id="pay", use=[tool]),
            input="Pay it",
            thread=thread_id,
            model=MODEL,
            generation_id="g3",
            approval_timeout_seconds=1,
        )
        with pytest.raises(crux.ApprovalError) as late:
            await worker.runtime.approve("call_t1", generation_id="g3", thread=thread_id)
        assert late.value.code == "not_awaiting"

    assert calls == []
    assert result.text == "No approval came."
    tool_message = openai_server.requests[1].body["messages"][-1]
    assert json.loads(tool_message["content"]) == {"error": "denied", "reason": "timeout"}
    assert result.thread_commit is not None


async def test_unknown_runs_are_refused_typed(client: Client, pool: asyncpg.Pool) -> None:
    runtime = Runtime(client, pool, task_queue="crux-approval-nobody")
    with pytest.raises(crux.ApprovalError) as missing:
        await runtime.approve("call_x", generation_id="nobody", thread="no:thread")
    assert missing.value.code == "not_found"
    with pytest.raises(crux.ApprovalError) as listing:
        await runtime.pending_approvals("nobody", thread="no:thread")
    assert listing.value.code == "not_found"
    with pytest.raises(crux.ConfigurationError):
        await runtime.pending_approvals()


async def test_a_tool_declared_with_approval_on_the_worker_waits_whatever_the_input_says(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    registered = _transfer_tool(calls)
    # The caller's copy of the tool does not ask for approval: the worker's declaration wins.
    offered = crux.tool("transfer", lambda _: "never here")
    thread_id = f"declared:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="transfer", arguments={"to": "x"}, id="call_w1")),
        TextReply(text="Refused by the operator."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[registered]) as worker:
        runtime = worker.runtime
        run = asyncio.ensure_future(
            runtime.generate(
                crux.prompt(id="pay", use=[offered]),
                input="Pay it",
                thread=thread_id,
                model=MODEL,
                generation_id="g5",
            )
        )
        [pending] = await _awaiting(runtime, "g5", thread_id)
        assert pending.call_id == "call_w1"
        await runtime.deny("call_w1", "operator", workflow_id=workflow_id_for("g5", thread_id))
        result = await asyncio.wait_for(run, 30)
    assert calls == []
    assert result.text == "Refused by the operator."


async def test_a_streamed_run_waits_for_its_approval_too(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[dict[str, Any]] = []
    tool = _transfer_tool(calls)
    thread_id = f"stream:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="transfer", arguments={"to": "s"}, id="call_s1")),
        TextReply(text="Streamed after approval."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime

        async def consume() -> list[crux.StreamUpdate]:
            return [
                update
                async for update in runtime.stream(
                    crux.prompt(id="pay", use=[tool]),
                    input="Pay it",
                    thread=thread_id,
                    model=MODEL,
                    generation_id="g7",
                )
            ]

        run = asyncio.ensure_future(consume())
        [pending] = await _awaiting(runtime, "g7", thread_id)
        await runtime.approve(pending.call_id, generation_id="g7", thread=thread_id)
        updates = await asyncio.wait_for(run, 30)
    final = updates[-1]
    assert isinstance(final, crux.StreamCommitted)
    assert final.generation.text == "Streamed after approval."
    assert calls == [{"to": "s"}]
