"""Thread operations are traced and counted on real PostgreSQL, content-free."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import crux
from telemetry import setup

CANARY = "canary-7a41c2-thread-text"


@pytest.fixture
def exporters() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    setup.configure(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    try:
        yield spans, reader
    finally:
        setup.reset()


def _counts(reader: InMemoryMetricReader) -> dict[tuple[str, str, bool], float]:
    found: dict[tuple[str, str, bool], float] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "crux.thread.operations":
                    continue
                for point in metric.data.data_points:
                    labels: dict[str, Any] = dict(point.attributes or {})
                    key = (labels["operation"], labels["status"], labels["replayed"])
                    found[key] = found.get(key, 0) + float(point.value)  # type: ignore[union-attr]
    return found


def _spans(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name.startswith("crux.thread.")]


async def test_every_thread_operation_has_a_content_free_span_and_metric(
    pool: asyncpg.Pool, exporters: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, reader = exporters
    thread_id = f"observed-{uuid.uuid4().hex[:6]}"
    conversation = crux.thread(id=thread_id, storage=pool)
    first = {"id": "m1", "role": "user", "content": f"first {CANARY}"}
    await conversation.append(first)
    await conversation.append(first)  # an identical retry: replayed
    await conversation.append({"id": "m2", "role": "assistant", "content": CANARY})
    edited = await conversation.edit("m1", content=f"edited {CANARY}", id="m1b")
    await conversation.select("m1")
    await conversation.redact("m2")
    with pytest.raises(crux.ThreadError):
        await conversation.edit("missing", content=CANARY)
    await conversation.delete()

    names = [span.name for span in _spans(spans)]
    assert names == [
        "crux.thread.append",
        "crux.thread.append",
        "crux.thread.append",
        "crux.thread.edit",
        "crux.thread.select",
        "crux.thread.redact",
        "crux.thread.edit",
        "crux.thread.delete",
    ]
    by_name = _spans(spans)
    appended, replayed = by_name[0], by_name[1]
    assert appended.attributes is not None and replayed.attributes is not None
    assert appended.attributes["gen_ai.conversation.id"] == thread_id
    assert appended.attributes["crux.thread.owner"] == "main"
    assert appended.attributes["crux.thread.status"] == "selected"
    assert appended.attributes["crux.thread.replayed"] is False
    assert replayed.attributes["crux.thread.replayed"] is True
    assert tuple(appended.attributes["crux.thread.message_ids"]) == ("m1",)  # type: ignore[arg-type]
    edit = by_name[3].attributes
    assert edit is not None and edit["crux.thread.head"] == edited.selected_head
    redact = by_name[5].attributes
    assert redact is not None and redact["crux.thread.messages"] == 1
    failed = by_name[6]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["error.type"]

    assert _counts(reader) == {
        ("append", "selected", False): 2,
        ("append", "selected", True): 1,
        ("edit", "selected", False): 1,
        ("select", "ok", False): 1,
        ("redact", "ok", False): 1,
        ("edit", "error", False): 1,
        ("delete", "ok", False): 1,
    }
    # Ids, counts and decisions only: no message text anywhere.
    for span in spans.get_finished_spans():
        values = [span.name, span.status.description or "", *(span.attributes or {}).values()]
        for event in span.events:
            values.extend((event.name, *(event.attributes or {}).values()))
        assert all(CANARY not in str(value) for value in values), span.name


def test_thread_operations_cost_nothing_without_telemetry() -> None:
    from crux._thread_observing import observed

    with observed("append", "t") as outcome:
        outcome.status = "selected"
    assert outcome.status == "selected"
