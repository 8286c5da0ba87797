"""Telemetry leaves the worker as configured: OTLP/HTTP to a collector, Prometheus on a port.

A `crux.Worker` started with `OTEL_EXPORTER_OTLP_ENDPOINT` and
`CRUX_PROMETHEUS_ADDRESS` set (here: a loopback collector and a free port) sends its spans and
metrics to the collector when it stops, and serves Temporal's SDK metrics for Prometheus while
it runs.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.client import Client

import crux
from crux._checks import connect_temporal
from crux.runtime import Runtime
from telemetry import setup
from tests.helpers import closed_run
from vocabulary.ids import workflow_id_for
from vocabulary.settings import Settings


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.received.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_configured_worker_exports_over_otlp_and_serves_prometheus(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    collector: tuple[str, list[tuple[str, bytes]]],
) -> None:
    endpoint, received = collector
    prometheus = f"127.0.0.1:{_free_port()}"
    settings = Settings.from_env(
        {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_DATABASE_URL": database_url,
            "CRUX_TASK_QUEUE": f"crux-export-{uuid.uuid4().hex[:8]}",
            "CRUX_SWEEP_INTERVAL_SECONDS": "0",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "CRUX_PROMETHEUS_ADDRESS": prometheus,
        }
    )
    assert settings.otel_endpoint == endpoint
    async with crux.Worker(settings=settings):
        assert setup.enabled()
        # A client connected while telemetry is on traces its calls (and serves Prometheus).
        traced = await connect_temporal(settings)
        runtime = Runtime.from_settings(traced, pool, settings)
        thread_id = f"export:{uuid.uuid4().hex[:6]}"
        result = await runtime.generate("hello", thread=thread_id)
        assert result.thread_commit is not None
        # The run's own figures are counted as it closes, just after the commit answered.
        await closed_run(traced, workflow_id_for(result.generation_id, thread_id))
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(f"http://{prometheus}/metrics")).text
    assert not setup.enabled()  # the worker flushed and turned its own telemetry off
    assert "temporal_workflow_completed" in scraped or "temporal_request" in scraped
    # The Crux metrics beside Temporal's, Prometheus-named.
    committed = [line for line in scraped.splitlines() if line.startswith("crux_turns_committed")]
    assert committed and 'status="selected"' in committed[0]
    assert "crux_stage_duration" in scraped
    # Stage times measured in the workflow, waits included, and the run's whole duration.
    counts = [
        line
        for line in scraped.splitlines()
        if line.startswith("crux_workflow_stage_duration_count")
    ]
    assert any('stage="invoking"' in line for line in counts)
    assert any('outcome="completed"' in line and 'stage="run"' in line for line in counts)

    traces = [body for path, body in received if path == "/v1/traces"]
    exported = [body for path, body in received if path == "/v1/metrics"]
    assert traces and exported
    names: set[str] = set()
    for body in traces:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                names.update(span.name for span in scope.spans)
    assert {"StartWorkflow:ManagedGenerationWorkflow", "chat offline:echo", "crux.commit"} <= names
    metric_names: set[str] = set()
    for body in exported:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                metric_names.update(metric.name for metric in scope.metrics)
    assert {"crux.turns.committed", "crux.provider.attempts", "crux.stage.duration"} <= metric_names
