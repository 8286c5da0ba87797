"""The stages a generation or summary run reports (query, current details, `CruxStage`)."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """Where a run is; its value is what operators see."""

    STARTING = "starting"
    READING = "reading"
    PLANNING = "planning"
    SUMMARISING = "summarising"
    COUNTING = "counting"
    INVOKING = "invoking"
    TOOLS = "tools"
    AWAITING_APPROVAL = "awaiting_approval"
    """A tool call waits for an operator to approve or deny it."""
    STORAGE_BLOCKED = "storage_blocked"
    """A stage waits for PostgreSQL."""
    COMMITTING = "committing"
    COMMIT_BLOCKED = "commit_blocked"
    """The accepted turn is staged; its publication waits for PostgreSQL."""
    MAINTENANCE = "maintenance"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
