"""OpenTelemetry metrics of the Crux steps: turns, attempts, errors, tokens, stage durations.

Off by default and then free: every `record_*` function returns at once until a meter is
installed (`telemetry.setup.configure`). Labels are names and decisions with a small, fixed
set of values (status, outcome, error type, model, stage): never ids, never content.

| instrument | kind | labels |
| --- | --- | --- |
| `crux.turns.committed` | counter | `status` (`selected`, `alternative`), `replayed` |
| `crux.provider.attempts` | counter | `gen_ai.provider.name`, `gen_ai.request.model`, `outcome` |
| `crux.provider.errors` | counter | `gen_ai.provider.name`, `gen_ai.request.model`, `error.type` |
| `crux.adaptations` | counter | `representation` (`summary`, `offload`, `omitted`, `authored`) |
| `crux.summary.preparations` | counter | `outcome` (`prepared`, `reused`, `failed`) |
| `crux.tool.calls` | counter | `outcome` (`ok`, `failed`, `denied`, `error`) |
| `gen_ai.client.token.usage` | counter | `gen_ai.token.type` (`input`, `output`), model, provider |
| `crux.stage.duration` | histogram (s) | `stage`, `outcome` (`ok`, `error`) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from telemetry.tracing import GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL, provider_of

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter

METER_NAME = "crux"
"""Instrumentation scope of the Crux metrics."""

TURNS_COMMITTED = "crux.turns.committed"
PROVIDER_ATTEMPTS = "crux.provider.attempts"
PROVIDER_ERRORS = "crux.provider.errors"
ADAPTATIONS = "crux.adaptations"
SUMMARY_PREPARATIONS = "crux.summary.preparations"
TOOL_CALLS = "crux.tool.calls"
TOKEN_USAGE = "gen_ai.client.token.usage"
STAGE_DURATION = "crux.stage.duration"

_MAX_LABEL_CHARS = 128


@dataclass(frozen=True)
class _Instruments:
    turns: Counter
    attempts: Counter
    errors: Counter
    adaptations: Counter
    summaries: Counter
    tools: Counter
    tokens: Counter
    stages: Histogram


_instruments: _Instruments | None = None


def install(meter: Meter | None) -> None:
    """Record Crux metrics with `meter` in this process (`None` turns them off)."""
    global _instruments
    if meter is None:
        _instruments = None
        return
    _instruments = _Instruments(
        turns=meter.create_counter(TURNS_COMMITTED, unit="{turn}", description="Turns committed"),
        attempts=meter.create_counter(
            PROVIDER_ATTEMPTS, unit="{attempt}", description="Provider attempts"
        ),
        errors=meter.create_counter(
            PROVIDER_ERRORS, unit="{error}", description="Failed provider attempts"
        ),
        adaptations=meter.create_counter(
            ADAPTATIONS, unit="{adaptation}", description="Contributors sent adapted"
        ),
        summaries=meter.create_counter(
            SUMMARY_PREPARATIONS, unit="{summary}", description="History summary preparations"
        ),
        tools=meter.create_counter(TOOL_CALLS, unit="{call}", description="Tool calls"),
        tokens=meter.create_counter(
            TOKEN_USAGE, unit="{token}", description="Tokens the providers reported"
        ),
        stages=meter.create_histogram(
            STAGE_DURATION, unit="s", description="Duration of the Crux steps"
        ),
    )


def enabled() -> bool:
    """Whether Crux metrics are recorded in this process."""
    return _instruments is not None


def _model_labels(model: str) -> dict[str, str]:
    return {
        GEN_AI_REQUEST_MODEL: model[:_MAX_LABEL_CHARS],
        GEN_AI_PROVIDER_NAME: provider_of(model),
    }


def record_turn(status: str, *, replayed: bool) -> None:
    """Count one committed turn (`selected` or `alternative`)."""
    if _instruments is not None:
        _instruments.turns.add(1, {"status": status, "replayed": replayed})


def record_attempt(model: str, outcome: str) -> None:
    """Count one provider attempt and how it ended (`answered`, `error`, ...)."""
    if _instruments is not None:
        _instruments.attempts.add(1, {**_model_labels(model), "outcome": outcome})


def record_error(model: str, error_type: str) -> None:
    """Count one failed provider attempt by its error class."""
    if _instruments is not None:
        labels = {**_model_labels(model), "error.type": error_type[:_MAX_LABEL_CHARS]}
        _instruments.errors.add(1, labels)


def record_tokens(model: str, *, input_tokens: int, output_tokens: int) -> None:
    """Add the tokens one provider call used."""
    if _instruments is None:
        return
    labels = _model_labels(model)
    _instruments.tokens.add(input_tokens, {**labels, "gen_ai.token.type": "input"})
    _instruments.tokens.add(output_tokens, {**labels, "gen_ai.token.type": "output"})


def record_adaptations(representations: list[str]) -> None:
    """Count the adaptations of one sealed plan, by representation."""
    if _instruments is not None:
        for representation in representations:
            _instruments.adaptations.add(1, {"representation": representation})


def record_summary(outcome: str) -> None:
    """Count one history summary preparation (`prepared`, `reused` or `failed`)."""
    if _instruments is not None:
        _instruments.summaries.add(1, {"outcome": outcome})


def record_tool_call(outcome: str) -> None:
    """Count one tool call (`ok`, `failed`, `denied` or `error`)."""
    if _instruments is not None:
        _instruments.tools.add(1, {"outcome": outcome})


def record_stage(stage: str, seconds: float, *, ok: bool) -> None:
    """Record how long one step of a generation took."""
    if _instruments is not None:
        _instruments.stages.record(seconds, {"stage": stage, "outcome": "ok" if ok else "error"})
