"""What an operator sees of a generation run: its content-free status."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class GenerationStatus(BaseModel):
    """The content-free status of one generation run (the `describe` query).

    Attributes:
        workflow_id: The run's workflow id.
        stage: The current `vocabulary.stages.Stage` value.
        details: Which step of the stage (`committing: round 2 waiting for storage`).
        attempt: The provider attempt the run is on (0 before the first).
        generation_id: The generation's id.
        thread_id: The Thread it writes to, `None` for an ad-hoc generation.
        model: The `provider:model` id.
        blocked_since: When the current wait for storage began, `None` if not waiting.
        last_error_type: The type name of the failure that made the run wait, if any.
        waiting: Whether the run waits out a backoff now (so `retry_now`/`abandon` apply).
    """

    model_config = ConfigDict(frozen=True)

    workflow_id: str = ""
    stage: str
    details: str | None = None
    attempt: int = 0
    generation_id: str
    thread_id: str | None = None
    model: str
    blocked_since: datetime | None = None
    last_error_type: str | None = None
    waiting: bool = False
