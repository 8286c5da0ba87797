"""Where a generation stands, published three ways: the query, current details, `CruxStage`.

Operators watch a run in the Temporal UI and plain clients filter on `CruxStage`; both show
stage names, ids and counts, never content. The search attribute is upserted only when the
stage changes: a stage that repeats with new details (tool call 2, storage round 3) costs no
history event.
"""

from __future__ import annotations

from temporalio import workflow

from contracts.generation import GenerationInput
from vocabulary.stages import Stage
from workflows import _search


class StageReporter:
    """The current stage of one run, kept in sync with what operators see."""

    def __init__(self) -> None:
        self.stage = Stage.STARTING
        self._published: Stage | None = None

    def publish_identity(self, request: GenerationInput) -> None:
        """Name this run in search attributes (thread, generation, model, first stage).

        Set by the workflow itself, whatever the starter passed, so a run started by any
        Temporal client shows the same attributes.
        """
        _search.upsert(
            _search.identity(
                thread_id=request.thread_id,
                generation_id=request.generation_id,
                model=request.model,
                stage=self.stage.value,
            )
        )
        self._published = self.stage

    def set(self, stage: Stage, details: str | None = None) -> None:
        """Enter `stage`; `details` (content-free) says which step of it."""
        self.stage = stage
        workflow.set_current_details(f"stage: {stage}" + (f" ({details})" if details else ""))
        if stage != self._published:
            _search.upsert([_search.STAGE.value_set(stage.value)])
            self._published = stage
