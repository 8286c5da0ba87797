"""Where a generation stands, published three ways: the query, current details, `CruxStage`.

Operators watch a run in the Temporal UI and plain clients filter on `CruxStage`; both show
stage names, ids and counts, never content. The query and the current details follow every
stage change at once. The search attribute is a history event, so it is upserted only when
the run is about to wait (an activity, a timer, a child workflow) or ends, and only when the
stage changed: stages passed within one workflow task were never observable anyway.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import MetricHistogramTimedelta, SearchAttributeUpdate

from contracts.generation import GenerationInput
from vocabulary.stages import Stage
from workflows import _search
from workflows._operator import OperatorControl


class StageReporter:
    """The current stage of one run, kept in sync with what operators see."""

    def __init__(self) -> None:
        self.stage = Stage.STARTING
        self._entered: datetime | None = None
        self._durations: MetricHistogramTimedelta | None = None
        self._published: Stage | None = None
        self._identity: list[SearchAttributeUpdate[Any]] = []
        self.details: str | None = None
        # Operator requests (retry now, abandon) reach every storage wait through here.
        self.control = OperatorControl()

    def publish_identity(self, request: GenerationInput) -> None:
        """Name this run (thread, generation, model) with the next stage published.

        Set by the workflow itself, whatever the starter passed, so a run started by any
        Temporal client shows the same attributes.
        """
        self._identity = _search.identity(
            thread_id=request.thread_id,
            generation_id=request.generation_id,
            model=request.model,
            stage=self.stage.value,
            # What the starter set already (the facade sets it all) costs nothing again.
            present=workflow.info().typed_search_attributes,
        )

    def set(self, stage: Stage, details: str | None = None) -> None:
        """Enter `stage`; `details` (content-free) says which step of it."""
        self._time(stage)
        self.stage = stage
        self.details = details
        workflow.set_current_details(f"stage: {stage}" + (f" ({details})" if details else ""))

    def conclude(self, stage: Stage, summary: str, text: str) -> None:
        """End in `stage`; `text` (multi-line, content-free) becomes the final current details.

        Args:
            stage: `completed`, `failed` or `cancelled`.
            summary: The one-line details the status query reports.
            text: What the Temporal UI shows once the run ended (figures, commit status).
        """
        self._time(stage)
        self.stage = stage
        self.details = summary
        workflow.set_current_details(text)
        run_time = workflow.now() - workflow.info().start_time
        self._histogram().record(run_time, {"stage": "run", "outcome": stage.value})

    def _time(self, stage: Stage) -> None:
        """Record how long the stage being left lasted (workflow time, waits included).

        Through the workflow's metric meter: nothing is recorded on replay, and nothing at
        all unless the worker's Temporal runtime exports metrics (`CRUX_PROMETHEUS_ADDRESS`).
        """
        now = workflow.now()
        if stage == self.stage and self._entered is not None:
            return
        if self._entered is not None:
            self._histogram().record(now - self._entered, {"stage": self.stage.value})
        self._entered = now

    def _histogram(self) -> MetricHistogramTimedelta:
        if self._durations is None:
            self._durations = workflow.metric_meter().create_histogram_timedelta(
                "crux_workflow_stage_duration",
                "Time a generation spent in each stage, waits included",
                "ms",
            )
        return self._durations

    def publish(self) -> None:
        """Upsert `CruxStage` (with the identity, the first time) if it changed."""
        if self.stage == self._published:
            return
        stage = _search.STAGE.value_set(self.stage.value)
        updates = [u for u in self._identity if u.key != _search.STAGE] + [stage]
        self._identity = []
        _search.upsert(updates)
        self._published = self.stage
