"""Operator control of a generation run: the update and query names and the status shape.

`ManagedGenerationWorkflow` answers the `describe` query with a `GenerationStatus` and takes
two updates while it waits for storage or for its commit: `retry_now` (try again at once
instead of waiting out the backoff) and `abandon` (drop the staged turn and fail the run
with `ThreadCommitError` code `abandoned`). Everything here is ids, names and figures.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict

from vocabulary.commits import WireModel

QUERY_DESCRIBE = "describe"
"""Query name: the run's content-free `GenerationStatus`."""

UPDATE_RETRY_NOW = "retry_now"
"""Update name: a run waiting for storage (or its commit) tries again at once."""

UPDATE_ABANDON = "abandon"
"""Update name: a run waiting for storage (or its commit) drops its staged turn and fails."""

OPERATOR_PATCH = "operator-control-v1"
"""Versioning marker: runs that wait for storage on a condition an update can end early."""


class GenerationStatus(WireModel):
    """Where one generation run stands, as an operator sees it (never content).

    Attributes:
        workflow_id: The run's workflow id.
        stage: The current stage (a `vocabulary.stages.Stage` value).
        details: Which step of the stage (`commit: round 2 waiting for storage`).
        attempt: The provider attempt the run is on (1 before the first call).
        generation_id: The generation id.
        thread_id: The Thread, `None` ad hoc.
        model: The model id the run was started with.
        waiting: Whether the run waits for storage now (so `retry_now` and `abandon` apply).
        blocked_since: When the current storage wait began, `None` when not blocked.
        last_error_type: The error type of the last failed storage call of the wait.
        running: Whether the run is still open (`False`: it completed, failed or ended).
        status: Temporal's execution status (`RUNNING`, `COMPLETED`, `FAILED`, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow_id: str = ""
    stage: str
    details: str | None = None
    attempt: int | None = None
    generation_id: str | None = None
    thread_id: str | None = None
    model: str | None = None
    waiting: bool = False
    blocked_since: datetime | None = None
    last_error_type: str | None = None
    running: bool = True
    status: str = "RUNNING"
