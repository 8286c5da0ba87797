"""Turning telemetry on: OpenTelemetry providers, the Temporal tracing interceptor, Prometheus.

Nothing here runs unless asked: a process that never calls `configure` (or `configure_otlp`)
records no span and no metric and imports no OpenTelemetry SDK.

- `configure(tracer_provider=..., meter_provider=...)` installs providers you built (tests pass
  an `InMemorySpanExporter` / `InMemoryMetricReader`; applications their own pipeline).
- `configure_otlp(endpoint)` builds SDK providers exporting over OTLP/HTTP (the worker does this
  when `OTEL_EXPORTER_OTLP_ENDPOINT` is set); it needs the `otel` extra.
- `tracing_interceptor()` is `temporalio.contrib.opentelemetry.TracingInterceptor` on the
  configured tracer: on a client it starts the trace at `start_workflow`; on a worker it
  continues it through workflows and activities.
- `serve_prometheus(address)` (the worker's `CRUX_PROMETHEUS_ADDRESS`) serves the Temporal
  SDK's own metrics (task latencies, ...) on a Prometheus endpoint, with the Crux metrics
  beside them (`crux_turns_committed`, ...).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from telemetry import metrics, tracing

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
    from temporalio.contrib.opentelemetry import TracingInterceptor
    from temporalio.runtime import Runtime

SERVICE_NAME = "crux-worker"

_state: dict[str, Any] = {}
_runtimes: dict[str, Runtime] = {}


def configure(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    """Record Crux spans and metrics of this process with these providers.

    Either may be omitted (spans without metrics, say). Calling it again replaces both; the
    global OpenTelemetry providers are left alone.

    Args:
        tracer_provider: Where the spans go (Crux steps and Temporal's own spans).
        meter_provider: Where the metrics go.
    """
    for key in ("tracer_provider", "meter_provider", "owned"):
        _state.pop(key, None)
    if tracer_provider is not None:
        _state["tracer_provider"] = tracer_provider
        tracing.install(tracer_provider.get_tracer(tracing.TRACER_NAME))
    else:
        tracing.install(None)
    if meter_provider is not None:
        _state["meter_provider"] = meter_provider
        metrics.install(meter_provider.get_meter(metrics.METER_NAME))
    else:
        metrics.install(None)


def reset() -> None:
    """Turn Crux telemetry off again (providers are not shut down: they are the caller's)."""
    configure()
    metrics.install_temporal(None)
    _state.pop("prometheus", None)


def serve_prometheus(address: str) -> Runtime:
    """Serve Temporal's SDK metrics and the Crux metrics for Prometheus on `host:port`.

    Returns:
        The Temporal runtime to connect clients with (`Client.connect(runtime=...)`): its
        meter is the one the Crux metrics are recorded with.
    """
    runtime = temporal_runtime(address)
    assert runtime is not None
    metrics.install_temporal(runtime.metric_meter)
    _state["prometheus"] = address
    return runtime


def enabled() -> bool:
    """Whether spans or metrics are recorded in this process."""
    return tracing.enabled() or metrics.enabled()


def configure_otlp(endpoint: str, *, service_name: str = SERVICE_NAME) -> None:
    """Export Crux (and Temporal) spans and Crux metrics over OTLP/HTTP to `endpoint`.

    Args:
        endpoint: The collector's base URL, e.g. `http://localhost:4318` (the signal paths
            `/v1/traces` and `/v1/metrics` are appended, as OpenTelemetry's own variable
            `OTEL_EXPORTER_OTLP_ENDPOINT` specifies).
        service_name: The `service.name` resource attribute (`OTEL_SERVICE_NAME` wins).

    Raises:
        ImportError: The OpenTelemetry SDK is not installed (`pip install 'crux-temporal[otel]'`).
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ImportError(
            "OpenTelemetry export needs the otel extra: pip install 'crux-temporal[otel]'"
        ) from None
    base = endpoint.rstrip("/")
    # OpenTelemetry's own variables keep their meaning: OTEL_SERVICE_NAME names the service,
    # OTEL_EXPORTER_OTLP_HEADERS (read by the exporters) carries a collector's credentials.
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name}
    )
    tracer_provider = SdkTracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces"))
    )
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics"))
    meter_provider = SdkMeterProvider(resource=resource, metric_readers=[reader])
    configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    _state["owned"] = True


def shutdown() -> None:
    """Flush and stop what `configure_otlp` and `serve_prometheus` set up.

    Providers passed to `configure` are the caller's: they are left running.
    """
    if _state.get("owned"):
        for key in ("tracer_provider", "meter_provider"):
            provider = _state.get(key)
            stop = getattr(provider, "shutdown", None)
            if callable(stop):
                stop()
        configure()
    if _state.pop("prometheus", None) is not None:
        metrics.install_temporal(None)


def tracing_interceptor() -> TracingInterceptor | None:
    """Temporal's OpenTelemetry interceptor on the configured tracer (`None` when off)."""
    provider: TracerProvider | None = _state.get("tracer_provider")
    if provider is None:
        return None
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return TracingInterceptor(provider.get_tracer("temporalio"))


def temporal_runtime(prometheus_address: str | None) -> Runtime | None:
    """A Temporal runtime serving SDK metrics on `host:port` for Prometheus (`None`: default).

    One runtime per address and process: the endpoint binds once.
    """
    if not prometheus_address:
        return None
    runtime = _runtimes.get(prometheus_address)
    if runtime is None:
        from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

        runtime = Runtime(
            telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=prometheus_address))
        )
        _runtimes[prometheus_address] = runtime
    return runtime
