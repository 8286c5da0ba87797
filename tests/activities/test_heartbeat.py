"""A worker lost in the middle of a summary preparation or a tool call is noticed quickly."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment
from temporalio.workflow import ActivityConfig

from activities import _heartbeat
from activities._heartbeat import heartbeating
from contracts.settings import ToolPolicySpec
from workflows import _options


@pytest.mark.parametrize(
    "config",
    [
        _options.PREPARE_SUMMARY_RUN,
        _options.RUN_TOOL,
        _options.run_tool(ToolPolicySpec(timeout_seconds=600)),
    ],
    ids=["prepare_summary_run", "run_tool", "run_tool_with_policy"],
)
def test_long_activities_carry_a_heartbeat_timeout_shorter_than_their_run(
    config: ActivityConfig,
) -> None:
    # Without one, a SIGKILLed worker holds its summary (and the generation waiting for it)
    # or its tool call for the whole start-to-close timeout: 15 and 5 minutes.
    heartbeat = config.get("heartbeat_timeout")
    run = config.get("start_to_close_timeout")
    assert isinstance(heartbeat, timedelta) and isinstance(run, timedelta)
    assert heartbeat <= timedelta(seconds=30)
    assert heartbeat < run
    assert timedelta(seconds=_heartbeat.HEARTBEAT_INTERVAL_SECONDS) * 3 <= heartbeat


async def test_heartbeating_beats_while_the_call_runs_and_returns_its_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_heartbeat, "HEARTBEAT_INTERVAL_SECONDS", 0.02)
    beats: list[object] = []
    environment = ActivityEnvironment()
    environment.on_heartbeat = lambda *details: beats.append(details)

    async def slow() -> str:
        await asyncio.sleep(0.3)
        return "done"

    assert await environment.run(heartbeating, slow()) == "done"
    assert len(beats) >= 5


async def test_heartbeating_passes_the_call_error_through() -> None:
    async def broken() -> None:
        raise LookupError("no such key")

    with pytest.raises(LookupError):
        await ActivityEnvironment().run(heartbeating, broken())
