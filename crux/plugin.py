"""`CruxPlugin`: the Temporal worker plugin that serves Crux's workflows and activities.

Add it to a worker of your own (`Worker(client, task_queue=..., plugins=[CruxPlugin(...)])`)
or to a `Replayer`; it owns everything the workflows need and nothing is listed twice:

- the workflows (`ManagedGenerationWorkflow`, `SummaryWorkflow`, `ParallelGenerationWorkflow`);
- the activity implementations of every stub in `contracts.stubs` (when given);
- the data converter (pydantic JSON, every payload `json/plain` so that any SDK's default
  converter reads it, the built-in metadata query's current details included; extra start
  arguments are left raw so that a start with two arguments fails typed instead of wedging
  its first task);
- the workflows run outside the SDK's workflow sandbox (they hold no code of yours; see
  `CruxPlugin`), or inside it with `sandboxed=True`;
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
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig, WorkerDeploymentConfig
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

__all__ = [
    "PASSTHROUGH_MODULES",
    "PLUGIN_NAME",
    "WORKFLOWS",
    "CruxPlugin",
    "crux_data_converter",
    "sandboxed_workflow_runner",
]

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
    # checks the closure in a fresh interpreter). When the workflows run in the sandbox
    # (`CruxPlugin(sandboxed=True)`, and every replay of the test suite), they share the
    # classes the data converter decodes into and spare each run re-validating pydantic
    # schemas. The workflow modules themselves are not on the list: the sandbox executes
    # them afresh per run, so that a non-deterministic call anywhere in them is refused.
    # Nothing that does I/O is on this list.
    "pydantic",
    "pydantic_core",
    "vocabulary",
    "planner",
    "contracts",
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


def sandboxed_workflow_runner() -> SandboxedWorkflowRunner:
    """The SDK's workflow sandbox, passing Crux's workflow modules through.

    Crux's workflows declare `sandboxed=False`; a worker or replayer that runs them with
    this runner instead (`CruxPlugin(sandboxed=True)`) has the sandbox refuse any
    non-deterministic call they might make (the clock, randomness, I/O, threads).
    """
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
        sandboxed: Run Crux's workflows inside the SDK's workflow sandbox
            (`sandboxed_workflow_runner`). Off by default: the workflows are this package's
            own code, with none of yours inside (hooks, tools and policies run as
            activities), and their determinism is proven by replaying every recorded
            history inside the sandbox, so a worker need not pay the sandbox on every
            activation and payload of every run (about a quarter of a short turn's workflow
            task time). On, it applies to every workflow of the worker that opts out of the
            sandbox, since the SDK has one runner for all of them.
    """

    def __init__(
        self,
        activities: GenerationActivities | None = None,
        *,
        cleanup: StagingCleanup | None = None,
        extra_activities: Sequence[Callable[..., Any]] = (),
        announcement: WorkerAnnouncement | None = None,
        sandboxed: bool = False,
    ) -> None:
        self._announcement = announcement
        self._sandboxed = sandboxed
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
        if self._sandboxed:
            config["unsandboxed_workflow_runner"] = sandboxed_workflow_runner()
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

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """Add the workflows, converter and options, as on a worker."""
        config = super().configure_replayer(config)
        if self._sandboxed:
            config["unsandboxed_workflow_runner"] = sandboxed_workflow_runner()
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
