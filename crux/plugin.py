"""`CruxPlugin`: the Temporal worker plugin that serves Crux's workflows and activities.

Add it to a worker of your own (`Worker(client, task_queue=..., plugins=[CruxPlugin(...)])`)
or to a `Replayer`; it owns everything the workflows need and nothing is listed twice:

- the workflows (`ManagedGenerationWorkflow`, `SummaryWorkflow`, `ParallelGenerationWorkflow`);
- the activity implementations of every stub in `contracts.stubs` (when given);
- the data converter (pydantic JSON, every payload `json/plain` so that any SDK's default
  converter reads it, the built-in metadata query's current details included; extra start
  arguments are left raw so that a start with two arguments fails typed instead of wedging
  its first task);
- the workflow sandbox with its passthrough modules;
- the failure types (`CruxError` fails a workflow, never its task);
- the interceptors (single-argument check; tracing and metrics when telemetry is on);
- with an announcement (`crux.Worker.plugin()` builds one), the registration check: the
  worker publishes what it registers beside its task queue and refuses to start where a
  live worker registers something else (see `crux._announce`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkerDeploymentConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities import GenerationActivities, StagingCleanup, implementations
from contracts.converter import PlainJSONPayloadConverter
from crux._announce import WorkerAnnouncement
from crux._telemetry import worker_interceptors
from vocabulary.errors import CruxError
from workflows.arity import SingleInputInterceptor, raw_extras_converter
from workflows.generation import ManagedGenerationWorkflow
from workflows.parallel import ParallelGenerationWorkflow
from workflows.summary import SummaryWorkflow

__all__ = ["PASSTHROUGH_MODULES", "PLUGIN_NAME", "WORKFLOWS", "CruxPlugin", "crux_data_converter"]

PLUGIN_NAME = "crux"
"""The plugin's name (`Plugin.name()`)."""

WORKFLOWS: tuple[type, ...] = (
    ManagedGenerationWorkflow,
    SummaryWorkflow,
    ParallelGenerationWorkflow,
)
"""The workflows a Crux worker serves."""


PASSTHROUGH_MODULES = (
    # Deterministic and side-effect-free at import, and all the workflow code imports (a test
    # checks the closure in a fresh interpreter); sharing them avoids re-validating pydantic
    # schemas and re-executing modules in every workflow sandbox, which a short turn would
    # otherwise pay on each run. Nothing that does I/O is on this list.
    "pydantic",
    "pydantic_core",
    "vocabulary",
    "planner",
    "contracts",
    # The workflow definitions and the steps they run. No module of the package keeps
    # state between runs (a test checks it), so the sandbox need not compile and execute
    # the definition module afresh for every run, which cost a short turn more worker CPU
    # than any of its steps; each run still gets its own workflow instance, and the
    # sandbox still restricts what runs inside it.
    "workflows",
)

# Eager activity dispatch: the provider call is taken by this worker straight from the
# workflow task that schedules it, when the server allows it (the dev stack and the compose
# file enable it); the read and the commit are local activities anyway.
_EAGER_ACTIVITIES = 3


def crux_data_converter(base: DataConverter | None = None) -> DataConverter:
    """The converter Crux's workflows need, keeping `base`'s codec and failure converter.

    Payloads are pydantic JSON (`temporalio.contrib.pydantic`), all of them `json/plain`, the
    SDK's own query answers too (`contracts.converter`); several start arguments decoded
    without type hints stay raw (see `workflows.arity.raw_extras_converter`). A payload codec on
    `base` (encryption, say) is kept.
    """
    base = base or pydantic_data_converter
    return dataclasses.replace(
        base, payload_converter_class=raw_extras_converter(PlainJSONPayloadConverter)
    )


def _sandbox(_existing: object) -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


class CruxPlugin(SimplePlugin):
    """The worker plugin that serves Crux generations.

    Args:
        activities: The generation activities, bound to the worker's pools and clients
            (`None` for a `Replayer`, which runs no activities).
        cleanup: The staging-cleanup activities; built from `activities` when omitted.
        extra_activities: More activities for the same worker (benchmark anchors, say).
        announcement: Publishes the worker's registrations for its task queue and refuses a
            start beside a worker that registers something else (`crux.Worker.plugin()`
            passes one); no check when omitted.
    """

    def __init__(
        self,
        activities: GenerationActivities | None = None,
        *,
        cleanup: StagingCleanup | None = None,
        extra_activities: Sequence[Callable[..., Any]] = (),
        announcement: WorkerAnnouncement | None = None,
    ) -> None:
        self._announcement = announcement
        implemented: list[Callable[..., Any]] = list(extra_activities)
        if activities is not None:
            cleanup = cleanup or StagingCleanup(activities.generations)
            implemented += implementations(activities, cleanup)
        # The SDK types `activities` as bare `Callable`, which strict checking reports.
        super().__init__(  # pyright: ignore[reportUnknownMemberType]
            PLUGIN_NAME,
            data_converter=crux_data_converter,
            workflows=list(WORKFLOWS),
            activities=implemented or None,
            workflow_runner=_sandbox,
            # A domain error raised in workflow code (an unknown model, an invalid budget)
            # can never succeed on a retried task: it fails the workflow, typed, instead.
            workflow_failure_exception_types=[CruxError],
            # Innermost, a start with extra arguments fails the workflow, typed, instead of
            # its task.
            interceptors=[SingleInputInterceptor()],
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Add the workflows, activities and options, on a client with the Crux converter."""
        if "client" in config:
            client = config["client"]
            wanted = crux_data_converter(client.data_converter)
            if client.data_converter.payload_converter_class is not wanted.payload_converter_class:
                # The same connection, with the converter the workflows need.
                client_config = client.config()
                client_config["data_converter"] = wanted
                config["client"] = Client(**client_config)
        config = super().configure_worker(config)
        if "client" in config:
            telemetry = list(worker_interceptors(config["client"]))
            if telemetry:
                # Spans and metrics outside the argument check, when telemetry is on.
                present = list(config["interceptors"]) if "interceptors" in config else []
                config["interceptors"] = [*telemetry, *present]
        if "max_eager_activity_reservations_per_workflow_task" not in config:
            config["max_eager_activity_reservations_per_workflow_task"] = _EAGER_ACTIVITIES
        if self._announcement is not None and not self._announcement.bound and "client" in config:
            client = config["client"]
            options: dict[str, Any] = dict(config)
            deployment: WorkerDeploymentConfig | None = options.get("deployment_config")
            versioned = deployment is not None and deployment.use_worker_versioning
            self._announcement.bind(
                namespace=client.namespace,
                task_queue=str(options.get("task_queue") or ""),
                identity=str(options.get("identity") or client.identity),
                build_id=deployment.version.build_id if versioned and deployment else "",
            )
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Run the worker; with an announcement, only beside workers that register the same.

        Raises:
            RegistrationConflictError: A live worker of the task queue registers other
                prompts, tools, hooks or models (before this one polls).
        """
        if self._announcement is None:
            await super().run_worker(worker, next)
            return
        await self._announcement.join()
        async with self._announcement.heartbeating():
            await super().run_worker(worker, next)
