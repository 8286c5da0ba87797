"""Recorded generation histories must replay against the current workflow code.

A change to the workflow's command sequence without `workflow.patched(...)` fails here.
Histories named `v2_*` were recorded on the current path (`generation-v2`); the others on the
first path, which `workflows.legacy` carries on unchanged.
Record new histories with `CRUX_RECORD_HISTORIES=1 make test-fast PYTEST_ARGS=tests/replay`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

import crux
from crux._worker import single_input_converter
from crux.errors import RequestCompositionError
from crux.models import workflow_id_for
from providers.loopback import (
    CountReply,
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from tests.helpers import new_worker, settings_for
from workflows import (
    ManagedGenerationWorkflow,
    ParallelGenerationWorkflow,
    SingleInputInterceptor,
    SummaryWorkflow,
)

HISTORIES = Path(__file__).parent / "histories"
RECORD = os.environ.get("CRUX_RECORD_HISTORIES") == "1"


def _recorded() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


@pytest.mark.parametrize("path", _recorded(), ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text(encoding="utf-8"))
    replayer = Replayer(
        workflows=[ManagedGenerationWorkflow, SummaryWorkflow, ParallelGenerationWorkflow],
        # As on the worker: a start with extra arguments fails the workflow, typed.
        data_converter=single_input_converter(pydantic_data_converter),
        interceptors=[SingleInputInterceptor()],
    )
    await replayer.replay_workflow(history)


def test_histories_are_recorded() -> None:
    assert len(_recorded()) >= 3


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"replay:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="one"),
        ErrorReply(status=429, headers={"retry-after-ms": "10"}),
        TextReply(text="two"),
        ErrorReply(status=400, code="context_length_exceeded", message="too long"),
    )
    # Histories of the current path carry the `v2_` prefix; those without it were recorded
    # on the first path and replay through `workflows.legacy`.
    names = {
        "v2_first_turn": "r1",
        "v2_retried_provider_call": "r2",
        "v2_context_overflow_then_too_large": "r3",
    }
    echo_tool = crux.tool("echo", lambda arguments: arguments)
    async with new_worker(client, pool, settings, tools=[echo_tool]) as worker:
        for generation_id in ("r1", "r2"):
            await worker.runtime.generate(
                "hello", thread=thread_id, model="openai:gpt-4o-mini", generation_id=generation_id
            )
        # Exact history leaves nothing to reduce after the provider's overflow rejection:
        # the linked recovery plan fails typed, before a second dispatch.
        with pytest.raises(RequestCompositionError):
            await worker.runtime.generate(
                "hello", thread=thread_id, model="openai:gpt-4o-mini", generation_id="r3"
            )
        adhoc = await worker.runtime.generate("adhoc", model="offline:echo", generation_id="r4")
        openai_server.enqueue(CountReply(input_tokens=40), TextReply(text="counted"))
        await worker.runtime.generate(
            "word " * 60,
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="r5",
            input_budget={"max": 64},
        )
        openai_server.enqueue(
            tool_call_reply(ScriptedToolCall(name="echo", arguments={"x": 1})),
            TextReply(text="done"),
        )
        await worker.runtime.generate(
            crux.prompt(id="tools", use=[echo_tool]),
            input="use the tool",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="r6",
        )
        managed_thread = f"replay-managed:{uuid.uuid4().hex[:6]}"
        for turn in range(6):
            await worker.runtime.generate(
                f"Logistics review item {turn}: carrier contracts, capacity and numbers {turn}.",
                thread=managed_thread,
                model="openai:gpt-4o-mini",
                generation_id=f"m{turn}",
            )
        await worker.runtime.generate(
            crux.prompt(id="managed", use=[crux.history(recent={"messages": 4})]),
            input="What did we decide?",
            thread=managed_thread,
            model="openai:gpt-4o-mini",
            generation_id="r7",
            input_budget={"max": 250},
        )
    names["v2_adhoc_offline"] = "r4"
    names["v2_tool_round"] = "r6"
    names["v2_authoritative_count"] = "r5"
    HISTORIES.mkdir(parents=True, exist_ok=True)
    names["v2_managed_inline_summary"] = "r7"
    for name, generation_id in names.items():
        if (HISTORIES / f"{name}.json").exists():
            # Keep histories recorded by earlier versions: they prove compatibility.
            continue
        tid = {"r4": None, "r7": managed_thread}.get(generation_id, thread_id)
        history = await client.get_workflow_handle(
            workflow_id_for(generation_id, tid)
        ).fetch_history()
        (HISTORIES / f"{name}.json").write_text(history.to_json(), encoding="utf-8")
    assert adhoc.text
