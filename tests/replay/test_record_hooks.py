"""Record histories of the step-hook path (an agent with `prepare_step` switching the model
on a tool round, a composition member with `prepare_invocation`, a hook that raises).

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only `hooks_*.json`, never over an
existing file. `test_replay.py` replays every recorded history.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import parallel_member_workflow_id


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_hook_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"replay-hooks:{uuid.uuid4().hex[:6]}"
    parallel_id = f"replay-hooks-{uuid.uuid4().hex[:6]}"
    echo_tool = crux.tool("echo", lambda arguments: arguments)
    switch = crux.step_hook(
        "switch",
        lambda step: {"model": "openai:gpt-4o"} if step.reason == "tool-round" else None,
    )
    baseline = crux.step_hook("baseline", lambda step: {"max_output_tokens": 256})

    def broken(step: crux.StepContext) -> None:
        raise RuntimeError("hook failure")

    failing = crux.step_hook("broken", broken)
    agent = crux.agent(
        id="replay-agent",
        prompt=crux.prompt(id="hooks", use=[echo_tool]),
        model="openai:gpt-4o-mini",
        prepare_step=switch,
    )
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="echo", arguments={"x": 1})),
        TextReply(text="done"),
    )
    async with new_worker(
        client, pool, settings, tools=[echo_tool], hooks=[switch, baseline, failing]
    ) as worker:
        await worker.runtime.generate(
            agent, input="use the tool", thread=thread_id, generation_id="k1"
        )
        with pytest.raises(crux.PreparationError):
            await worker.runtime.generate(
                crux.agent(
                    id="fragile",
                    prompt=crux.prompt(id="p"),
                    model="openai:gpt-4o-mini",
                    prepare_step=failing,
                ),
                input="hi",
                thread=thread_id,
                generation_id="k2",
            )
        openai_server.enqueue(TextReply(text="member"))
        await worker.runtime.parallel(
            id=parallel_id,
            context="hi",
            agents={
                "member": crux.agent(
                    id="member",
                    prompt=crux.prompt(id="member"),
                    model="openai:gpt-4o-mini",
                    prepare_invocation=baseline,
                    prepare_step=switch,
                )
            },
        )
    workflow_ids = {
        "hooks_tool_round": workflow_id_for("k1", thread_id),
        "hooks_failed": workflow_id_for("k2", thread_id),
        "hooks_invocation_member": parallel_member_workflow_id(parallel_id, "member"),
    }
    for name, workflow_id in workflow_ids.items():
        await record_history(client, workflow_id, name)
