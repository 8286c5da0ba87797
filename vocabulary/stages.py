"""The stages a generation or summary run reports (query, current details, `CruxStage`)."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """Where a run is; its value is what operators see."""

    STARTING = "starting"
    READING = "reading"
    INPUT_SAFETY = "input_safety"
    """Input safety policies judge the rendered user turn (before anything is planned)."""
    PLANNING = "planning"
    SUMMARISING = "summarising"
    COUNTING = "counting"
    INVOKING = "invoking"
    TOOLS = "tools"
    AWAITING_APPROVAL = "awaiting_approval"
    """A tool call waits for an operator to approve or deny it."""
    STORAGE_BLOCKED = "storage_blocked"
    """A stage waits for PostgreSQL."""
    OUTPUT_CHECKS = "output_checks"
    """Terminal safety and the constraints judge the final reply (before the commit)."""
    COMMITTING = "committing"
    COMMIT_BLOCKED = "commit_blocked"
    """The accepted turn is staged; its publication waits for PostgreSQL."""
    SUCCESS_HOOKS = "success_hooks"
    """Success hooks run after the commit (the turn is committed whatever they do)."""
    MAINTENANCE = "maintenance"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
