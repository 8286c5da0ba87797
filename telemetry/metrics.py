"""OpenTelemetry metrics of the Crux steps: turns, attempts, errors, tokens, stage durations.

Off by default and then free: every `record_*` function returns at once until a meter is
installed: an OpenTelemetry one (`telemetry.setup.configure`) and/or the Temporal runtime's
(`install_temporal`, which puts them beside Temporal's own metrics on its Prometheus endpoint,
named with `_` for `.`). Labels are names and decisions with a small, fixed
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
| `crux.thread.operations` | counter | `operation` (`append`, `edit`, ...), `status`, `replayed` |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from telemetry.tracing import GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL, provider_of

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter
    from temporalio.common import MetricCounter, MetricHistogramFloat, MetricMeter

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
THREAD_OPERATIONS = "crux.thread.operations"

_MAX_LABEL_CHARS = 128

Labels = Mapping[str, str | bool]

# name -> (unit, description); every instrument is a counter except the stage durations.
_COUNTERS: dict[str, tuple[str, str]] = {
    TURNS_COMMITTED: ("{turn}", "Turns committed"),
    PROVIDER_ATTEMPTS: ("{attempt}", "Provider attempts"),
    PROVIDER_ERRORS: ("{error}", "Failed provider attempts"),
    ADAPTATIONS: ("{adaptation}", "Contributors sent adapted"),
    SUMMARY_PREPARATIONS: ("{summary}", "History summary preparations"),
    TOOL_CALLS: ("{call}", "Tool calls"),
    TOKEN_USAGE: ("{token}", "Tokens the providers reported"),
    THREAD_OPERATIONS: ("{operation}", "Thread operations"),
}


class _Sink(Protocol):
    def count(self, name: str, value: int, labels: Labels) -> None: ...

    def observe(self, name: str, seconds: float, labels: Labels) -> None: ...


class _OpenTelemetrySink:
    """Instruments of an OpenTelemetry meter."""

    def __init__(self, meter: Meter) -> None:
        self._counters: dict[str, Counter] = {
            name: meter.create_counter(name, unit=unit, description=description)
            for name, (unit, description) in _COUNTERS.items()
        }
        self._stages: Histogram = meter.create_histogram(
            STAGE_DURATION, unit="s", description="Duration of the Crux steps"
        )

    def count(self, name: str, value: int, labels: Labels) -> None:
        self._counters[name].add(value, labels)

    def observe(self, name: str, seconds: float, labels: Labels) -> None:
        self._stages.record(seconds, labels)


class _TemporalSink:
    """Instruments of the Temporal runtime's meter (served with its Prometheus metrics).

    Prometheus allows neither dots in names nor in label names: `crux.turns.committed`
    becomes `crux_turns_committed`, `gen_ai.request.model` the label `gen_ai_request_model`.
    """

    def __init__(self, meter: MetricMeter) -> None:
        self._counters: dict[str, MetricCounter] = {
            name: meter.create_counter(_flat(name), description, unit)
            for name, (unit, description) in _COUNTERS.items()
        }
        self._stages: MetricHistogramFloat = meter.create_histogram_float(
            _flat(STAGE_DURATION), "Duration of the Crux steps", "s"
        )

    def count(self, name: str, value: int, labels: Labels) -> None:
        self._counters[name].add(value, {_flat(k): v for k, v in labels.items()})

    def observe(self, name: str, seconds: float, labels: Labels) -> None:
        self._stages.record(seconds, {_flat(k): v for k, v in labels.items()})


def _flat(name: str) -> str:
    return name.replace(".", "_")


_sinks: dict[str, _Sink] = {}


def install(meter: Meter | None) -> None:
    """Record Crux metrics with an OpenTelemetry `meter` (`None` stops doing so)."""
    if meter is None:
        _sinks.pop("otel", None)
    else:
        _sinks["otel"] = _OpenTelemetrySink(meter)


def install_temporal(meter: MetricMeter | None) -> None:
    """Also record them with a Temporal runtime's meter (`None` stops doing so).

    With a runtime serving Prometheus (`CRUX_PROMETHEUS_ADDRESS`), the Crux metrics appear on
    the same endpoint as Temporal's own.
    """
    if meter is None:
        _sinks.pop("temporal", None)
    else:
        _sinks["temporal"] = _TemporalSink(meter)


def _count(name: str, value: int, labels: Labels) -> None:
    for sink in tuple(_sinks.values()):
        sink.count(name, value, labels)


def enabled() -> bool:
    """Whether Crux metrics are recorded in this process."""
    return bool(_sinks)


def _model_labels(model: str) -> dict[str, str]:
    return {
        GEN_AI_REQUEST_MODEL: model[:_MAX_LABEL_CHARS],
        GEN_AI_PROVIDER_NAME: provider_of(model),
    }


def record_turn(status: str, *, replayed: bool) -> None:
    """Count one committed turn (`selected` or `alternative`)."""
    if _sinks:
        _count(TURNS_COMMITTED, 1, {"status": status, "replayed": replayed})


def record_attempt(model: str, outcome: str) -> None:
    """Count one provider attempt and how it ended (`answered`, `error`, ...)."""
    if _sinks:
        _count(PROVIDER_ATTEMPTS, 1, {**_model_labels(model), "outcome": outcome})


def record_error(model: str, error_type: str) -> None:
    """Count one failed provider attempt by its error class."""
    if _sinks:
        labels = {**_model_labels(model), "error.type": error_type[:_MAX_LABEL_CHARS]}
        _count(PROVIDER_ERRORS, 1, labels)


def record_tokens(model: str, *, input_tokens: int, output_tokens: int) -> None:
    """Add the tokens one provider call used."""
    if not _sinks:
        return
    labels = _model_labels(model)
    _count(TOKEN_USAGE, input_tokens, {**labels, "gen_ai.token.type": "input"})
    _count(TOKEN_USAGE, output_tokens, {**labels, "gen_ai.token.type": "output"})


def record_adaptations(representations: list[str]) -> None:
    """Count the adaptations of one sealed plan, by representation."""
    for representation in representations if _sinks else ():
        _count(ADAPTATIONS, 1, {"representation": representation})


def record_summary(outcome: str) -> None:
    """Count one history summary preparation (`prepared`, `reused` or `failed`)."""
    if _sinks:
        _count(SUMMARY_PREPARATIONS, 1, {"outcome": outcome})


def record_tool_call(outcome: str) -> None:
    """Count one tool call (`ok`, `failed`, `denied` or `error`)."""
    if _sinks:
        _count(TOOL_CALLS, 1, {"outcome": outcome})


def record_stage(stage: str, seconds: float, *, ok: bool) -> None:
    """Record how long one step of a generation took."""
    for sink in tuple(_sinks.values()):
        sink.observe(STAGE_DURATION, seconds, {"stage": stage, "outcome": "ok" if ok else "error"})


def record_thread_operation(operation: str, status: str, *, replayed: bool) -> None:
    """Count one Thread operation and how it ended.

    Args:
        operation: `append`, `edit`, `select`, `redact`, `remove` or `delete`.
        status: `selected` or `alternative` for a publication, `ok` for the others, or
            `error`.
        replayed: An identical retry returned the stored outcome.
    """
    if _sinks:
        labels = {"operation": operation, "status": status, "replayed": replayed}
        _count(THREAD_OPERATIONS, 1, labels)
