"""Record histories of generations whose tool calls wait for approval.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `v2_approval_*` histories, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from tests.helpers import eventually, new_worker, settings_for
from tests.replay.test_replay import HISTORIES, RECORD
from vocabulary.ids import workflow_id_for


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_approval_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    def transfer(arguments: dict[str, Any]) -> str:
        return "sent"

    tool = crux.tool("transfer", transfer, requires_approval=True)
    thread_id = f"replay-approval:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="transfer", arguments={"to": "a"}, id="call_1"),
            ScriptedToolCall(name="transfer", arguments={"to": "b"}, id="call_2"),
        ),
        TextReply(text="one sent, one refused"),
        tool_call_reply(ScriptedToolCall(name="transfer", arguments={"to": "c"}, id="call_3")),
        TextReply(text="no decision came"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        prompt = crux.prompt(id="pay", use=[tool])
        run = asyncio.ensure_future(
            runtime.generate(
                prompt, input="pay", thread=thread_id, model="openai:gpt-4o", generation_id="a1"
            )
        )

        async def pending() -> int:
            try:
                return len(await runtime.pending_approvals("a1", thread=thread_id))
            except crux.ApprovalError:
                return 0

        await eventually(pending, lambda count: count == 2)
        await runtime.deny("call_2", "policy", generation_id="a1", thread=thread_id)
        await runtime.approve("call_1", generation_id="a1", thread=thread_id)
        await run
        await runtime.generate(
            prompt,
            input="pay again",
            thread=thread_id,
            model="openai:gpt-4o",
            generation_id="a2",
            approval_timeout_seconds=1,
        )
    for name, generation_id in (
        ("v2_approval_approve_and_deny", "a1"),
        ("v2_approval_timeout", "a2"),
    ):
        target = HISTORIES / f"{name}.json"
        if target.exists():
            continue
        history = await client.get_workflow_handle(
            workflow_id_for(generation_id, thread_id)
        ).fetch_history()
        target.write_text(history.to_json(), encoding="utf-8")
