"""Recorded histories of the current command version must replay against the workflow code.

This is the versioning policy's proof (see `workflows.versioning` and the docs' Versioning
page). Every history in `histories/v<COMMAND_VERSION>/` is replayed through the Crux worker
plugin, exactly as a worker of this build would. A change to a workflow's command sequence
makes one of them fail: ship it as a new worker deployment version instead (bump
`COMMAND_VERSION`, then record the new version's histories with
`CRUX_RECORD_HISTORIES=1 make test`); `test_every_scenario_is_recorded` fails until they exist.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

import crux
from crux.errors import RequestCompositionError
from crux.models import workflow_id_for
from crux.plugin import CruxPlugin
from providers.loopback import (
    CountReply,
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from tests.helpers import grow_thread, new_worker, settings_for
from tests.replay.scenarios import HISTORIES, SCENARIOS, current_histories
from workflows.versioning import COMMAND_VERSION

RECORD = os.environ.get("CRUX_RECORD_HISTORIES") == "1"


def _recorded() -> list[Path]:
    return sorted(current_histories().glob("*.json"))


def _kept() -> list[Path]:
    """Every kept history: the current version's and those of earlier versions still kept.

    Runs of an earlier version finish on its own workers (they are pinned), so only the
    current version's histories must replay; an earlier version's that still do show this
    build can also take over its runs.
    """
    return sorted(HISTORIES.glob("v*/*.json"))


@pytest.mark.parametrize("sandboxed", [False, True], ids=["as-deployed", "in-sandbox"])
@pytest.mark.parametrize("path", _kept(), ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_recorded_history_replays(path: Path, sandboxed: bool) -> None:
    text = path.read_text(encoding="utf-8")
    # The run's own workflow id: a generation refuses to run under another one.
    started = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]
    history = WorkflowHistory.from_json(started.get("workflowId", path.stem), text)
    # The plugin brings the workflows, the converter, the failure types and the interceptors,
    # as on a worker: nothing is listed here by hand. The workflows run outside the SDK's
    # sandbox on a worker; replayed inside it too, any non-deterministic call they made (the
    # clock, randomness, I/O) on a recorded path would fail the replay.
    replayer = Replayer(workflows=[], plugins=[CruxPlugin(sandboxed=sandboxed)])
    await replayer.replay_workflow(history)


@pytest.mark.skipif(RECORD, reason="recording: the histories are being written")
def test_every_scenario_is_recorded() -> None:
    """The current command version has a history for every scenario, and no stray one."""
    recorded = {path.stem for path in _recorded()}
    missing = sorted(SCENARIOS - recorded)
    assert not missing, (
        f"command version {COMMAND_VERSION} lacks recorded histories {missing}: record them"
        " with `CRUX_RECORD_HISTORIES=1 make test`"
    )
    assert recorded <= SCENARIOS, f"unknown histories {sorted(recorded - SCENARIOS)}"


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
    names = {
        "first_turn": "r1",
        "retried_provider_call": "r2",
        "context_overflow_then_too_large": "r3",
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
        await grow_thread(
            worker.runtime,
            managed_thread,
            "openai:gpt-4o-mini",
            lambda turn: (
                f"Logistics review item {turn}: carrier contracts, capacity and numbers {turn}."
            ),
            ids="m",
        )
        await worker.runtime.generate(
            crux.prompt(id="managed", use=[crux.history(recent={"messages": 4})]),
            input="What did we decide?",
            thread=managed_thread,
            model="openai:gpt-4o-mini",
            generation_id="r7",
            input_budget={"max": 250},
        )
    names["adhoc_offline"] = "r4"
    names["tool_round"] = "r6"
    names["authoritative_count"] = "r5"
    histories = current_histories()
    histories.mkdir(parents=True, exist_ok=True)
    names["managed_inline_summary"] = "r7"
    for name, generation_id in names.items():
        if (histories / f"{name}.json").exists():
            # Written once per command version: a re-recording would hide a change.
            continue
        tid = {"r4": None, "r7": managed_thread}.get(generation_id, thread_id)
        history = await client.get_workflow_handle(
            workflow_id_for(generation_id, tid)
        ).fetch_history()
        (histories / f"{name}.json").write_text(history.to_json(), encoding="utf-8")
    assert adhoc.text
