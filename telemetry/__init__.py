"""Logs, traces and metrics: structured, content-free, configured once per process.

`telemetry.logs` configures logging; `telemetry.tracing` and `telemetry.metrics` record the
Crux spans and metrics once `telemetry.setup` installed providers (off, and free, otherwise).
"""
