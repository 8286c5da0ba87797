"""Telemetry wiring of clients and workers: which interceptors, which runtime.

Everything is off unless `telemetry.setup` was configured (the worker configures it from
`Settings.otel_endpoint`); then clients trace `start_workflow` and workers add Temporal's
tracing interceptor (unless their client already carries it) and the Crux activity spans and
metrics (`activities.observing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import Interceptor as WorkerInterceptor

from activities.observing import ObservingInterceptor
from telemetry import setup

__all__ = ["client_interceptors", "worker_interceptors"]


def client_interceptors() -> list[ClientInterceptor]:
    """Interceptors for a new client: Temporal's tracing one when tracing is on."""
    interceptor = setup.tracing_interceptor()
    return [interceptor] if interceptor is not None else []


def worker_interceptors(client: Client) -> Sequence[WorkerInterceptor]:
    """Interceptors for a new worker on `client` (none when telemetry is off)."""
    if not setup.enabled():
        return []
    chosen: list[WorkerInterceptor] = []
    # A client's interceptors that are worker interceptors too apply to its workers already.
    traced = any(
        type(interceptor).__name__ == "TracingInterceptor"
        for interceptor in client.config()["interceptors"]
    )
    interceptor = setup.tracing_interceptor()
    if interceptor is not None and not traced:
        chosen.append(interceptor)
    chosen.append(ObservingInterceptor())
    return chosen
