"""The worker plugin registers every workflow stub's implementation exactly once."""

from __future__ import annotations

from collections import Counter

import asyncpg
import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities import activity_name, implements
from contracts import stubs
from contracts.activities import DiscardGenerationInput, ReadRequestInput
from contracts.stubs import STUBS
from crux._worker import worker_resources
from crux.plugin import WORKFLOWS, CruxPlugin
from tests.helpers import settings_for


async def test_every_stub_is_implemented_once_by_the_plugin(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with worker_resources(settings_for(database_url), pool=pool) as activities:
        worker = Worker(client, task_queue="crux-plugin-check", plugins=[CruxPlugin(activities)])
        active = worker.config(active_config=True)
        registered = Counter(activity_name(function) for function in active.get("activities", []))
        assert set(active.get("workflows", [])) == set(WORKFLOWS)
    wanted = Counter(activity_name(stub) for stub in STUBS)
    assert registered == wanted


def _declare_a_wrong_implementation() -> None:
    class _Wrong:
        @implements(stubs.commit_turn)
        async def commit_turn(self, request: ReadRequestInput) -> None: ...

    del _Wrong


def test_an_implementation_with_other_types_is_refused_at_import() -> None:
    with pytest.raises(TypeError, match="crux.commit_turn"):
        _declare_a_wrong_implementation()


async def test_a_stub_reached_without_the_plugin_names_the_remedy() -> None:
    with pytest.raises(NotImplementedError, match="Crux plugin"):
        await stubs.discard_generation(DiscardGenerationInput(generation_id="g"))


async def test_the_workflows_run_outside_the_sandbox_unless_the_plugin_is_asked(
    client: Client,
) -> None:
    """Crux's workflows opt out of the sandbox; `sandboxed=True` runs them inside it."""
    assert all(not workflow._Definition.must_from_class(w).sandboxed for w in WORKFLOWS)
    plain = Worker(client, task_queue="crux-plugin-unsandboxed", plugins=[CruxPlugin()])
    runner = plain.config(active_config=True).get("unsandboxed_workflow_runner")
    assert isinstance(runner, UnsandboxedWorkflowRunner)
    # The user's own runner for sandboxed workflows is left as it was.
    assert isinstance(
        plain.config(active_config=True).get("workflow_runner"), SandboxedWorkflowRunner
    )
    guarded = Worker(
        client, task_queue="crux-plugin-sandboxed", plugins=[CruxPlugin(sandboxed=True)]
    )
    runner = guarded.config(active_config=True).get("unsandboxed_workflow_runner")
    assert isinstance(runner, SandboxedWorkflowRunner)
