"""OpenTelemetry spans and metrics on the real stack, read from in-memory exporters.

A turn with a failed provider attempt and a tool round, and a managed turn that needs an
inline summary, produce Temporal's spans (through `TracingInterceptor` on the client and the
worker) and the Crux spans (plan, provider attempt, tool call, commit, summary) in one trace,
with GenAI semantic-convention attributes, and the Crux metrics. A canary planted in the
input, the messages, the tool arguments and the provider's error text appears in no span
name, attribute, event or metric label.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.client import Client

import crux
from activities import observing
from contracts.activities import ACTIVITY_COMMIT_TURN, ACTIVITY_INVOKE_MODEL
from crux._telemetry import worker_interceptors
from providers.loopback import (
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from telemetry import setup, tracing
from tests.helpers import closed_run, grow_thread, new_worker, settings_for, workflow_metadata
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o"
CANARY = "canary-5d1e0b-private"
INVOKE = "chat openai:gpt-4o"


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self) -> list[tuple[str, dict[str, Any], float]]:
        """Every data point as (instrument name, labels, value: sum or histogram count)."""
        data = self.metrics.get_metrics_data()
        found: list[tuple[str, dict[str, Any], float]] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.count  # type: ignore[union-attr]
                        found.append((metric.name, dict(point.attributes or {}), float(value)))
        return found

    def total(self, name: str, **labels: Any) -> float:
        return sum(
            value
            for metric, attributes, value in self.points()
            if metric == name and all(attributes.get(k) == v for k, v in labels.items())
        )


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    setup.configure(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    try:
        yield Telemetry(spans=spans, metrics=reader)
    finally:
        setup.reset()


@pytest_asyncio.fixture
async def traced(client: Client, telemetry: Telemetry) -> AsyncIterator[Client]:
    """The session's client with Temporal's tracing interceptor, as `connect_temporal` builds it."""
    interceptor = setup.tracing_interceptor()
    assert interceptor is not None
    config = client.config()
    config["interceptors"] = [interceptor]
    yield Client(**config)


def _assert_content_free(telemetry: Telemetry) -> int:
    """Scan every span name, attribute, event and status, and every metric label."""
    scanned = 0
    for span in telemetry.finished():
        values: list[object] = [span.name, span.status.description or ""]
        values.extend((span.attributes or {}).values())
        for event in span.events:
            values.append(event.name)
            values.extend((event.attributes or {}).values())
        for value in values:
            assert CANARY not in str(value), (span.name, value)
            scanned += 1
    for name, labels, _ in telemetry.points():
        for value in (name, *labels.values()):
            assert CANARY not in str(value), (name, value)
            scanned += 1
    return scanned


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


async def test_a_turn_with_a_failed_attempt_and_a_tool_round_is_traced_and_counted(
    traced: Client,
    telemetry: Telemetry,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
) -> None:
    async def weather(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"city": arguments["city"], "forecast": f"sunny {CANARY}"}

    weather_tool = crux.tool(
        "get_weather",
        weather,
        description="Forecast for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    assistant = crux.prompt(id="weather", use=[weather_tool])
    thread_id = f"otel:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        # The first attempt fails (retryable, retried at once by Temporal).
        ErrorReply(status=503, message=f"overloaded {CANARY}", headers={"retry-after-ms": "1"}),
        tool_call_reply(ScriptedToolCall(name="get_weather", arguments={"city": CANARY})),
        TextReply(text=f"Sunny {CANARY}."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(traced, pool, settings, tools=[weather_tool]) as worker:
        result = await worker.runtime.generate(
            assistant,
            input=f"Weather in {CANARY}?",
            thread=thread_id,
            model=MODEL,
            generation_id="otel-1",
        )
        handle = await closed_run(traced, workflow_id_for("otel-1", thread_id))
        metadata = await workflow_metadata(handle)
    assert result.thread_commit is not None
    # The UI counts the failed try with the attempts.
    assert "attempts: 3 (1 failed and retried), tool rounds: 1, replans: 0" in (
        metadata.current_details.splitlines()
    )
    spans = telemetry.finished()
    names = [span.name for span in spans]

    # Temporal's own spans, from the client through the workflow to the activities.
    assert "StartWorkflow:ManagedGenerationWorkflow" in names
    assert "RunWorkflow:ManagedGenerationWorkflow" in names
    assert "RunActivity:crux.invoke_model" in names
    start = _one(spans, "StartWorkflow:ManagedGenerationWorkflow")
    assert start.context is not None
    trace_id = start.context.trace_id

    # The Crux spans, all in the trace the client started.
    plans = [s for s in spans if s.name == "crux.plan"]
    invokes = [s for s in spans if s.name == INVOKE]
    tools = [s for s in spans if s.name == "execute_tool"]
    commit = _one(spans, "crux.commit")
    assert len(plans) == 2 and len(invokes) == 3 and len(tools) == 1
    for span in [*plans, *invokes, *tools, commit]:
        assert span.context is not None and span.context.trace_id == trace_id, span.name
        # Each is a child of Temporal's span of its activity.
        assert span.parent is not None
        [parent] = [s for s in spans if s.context and s.context.span_id == span.parent.span_id]
        assert parent.name.startswith("RunActivity:"), (span.name, parent.name)

    failed, *answered = sorted(invokes, key=lambda s: s.start_time or 0)
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes is not None
    assert str(failed.attributes["error.type"]).startswith("Provider")
    for span in answered:
        attributes = span.attributes or {}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.system"] == "openai"
        assert attributes["gen_ai.request.model"] == MODEL
        assert int(str(attributes["gen_ai.usage.input_tokens"])) > 0
        assert int(str(attributes["gen_ai.usage.output_tokens"])) > 0
        assert attributes["crux.generation_id"] == "otel-1"
        assert attributes["gen_ai.conversation.id"] == thread_id
    assert [tuple((s.attributes or {})["gen_ai.response.finish_reasons"]) for s in answered] == [  # type: ignore[arg-type]
        ("tool_calls",),
        ("stop",),
    ]
    tool_attributes = tools[0].attributes or {}
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "get_weather"
    assert tool_attributes["crux.tool.failed"] is False
    plan_attributes = plans[1].attributes or {}
    assert plan_attributes["crux.plan.previous_request_id"] == result.steps[0].request.id
    assert int(str(plan_attributes["crux.plan.input_tokens"])) > 0
    commit_attributes = commit.attributes or {}
    assert commit_attributes["crux.commit.status"] == "selected"
    assert commit_attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens

    # The metrics of the same turn.
    assert telemetry.total("crux.turns.committed", status="selected") == 1
    assert telemetry.total("crux.provider.attempts", outcome="answered") == 2
    assert telemetry.total("crux.provider.attempts", outcome="error") == 1
    errors = [labels for name, labels, _ in telemetry.points() if name == "crux.provider.errors"]
    assert len(errors) == 1 and str(errors[0]["error.type"]).startswith("Provider")
    assert telemetry.total("crux.tool.calls", outcome="ok") == 1
    tokens_in = telemetry.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"})
    tokens_out = telemetry.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "output"})
    assert tokens_in == result.usage.input_tokens
    assert tokens_out == result.usage.output_tokens
    stages = {
        labels["stage"] for name, labels, _ in telemetry.points() if name == "crux.stage.duration"
    }
    assert {"read", "plan", "invoke", "tools", "commit"} <= stages
    assert telemetry.total("crux.stage.duration", stage="invoke", outcome="error") == 1

    assert _assert_content_free(telemetry) > 100


async def test_an_inline_summary_counts_its_adaptation_and_preparation(
    traced: Client,
    telemetry: Telemetry,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
) -> None:
    thread_id = f"otel-sum:{uuid.uuid4().hex[:6]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(traced, pool, settings) as worker:
        await grow_thread(
            worker.runtime,
            thread_id,
            MODEL,
            lambda turn: f"Logistics review item {turn}: {CANARY} carrier contracts {turn * 17}.",
        )
        await worker.runtime.generate(
            crux.prompt(id="managed", use=[crux.history(recent={"messages": 4})]),
            input=f"What did we decide? {CANARY}",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
            generation_id="otel-managed",
        )
    spans = telemetry.finished()
    # A plain turn: read, plan, one provider call, commit, each once, in one trace.
    plain = [s for s in spans if (s.attributes or {}).get("crux.generation_id") == "grow-0"]
    assert sorted(s.name for s in plain) == sorted(
        ["crux.read", "crux.plan", INVOKE, "crux.commit"]
    )
    assert len({s.context.trace_id for s in plain if s.context is not None}) == 1
    summary = _one(spans, "crux.summary")
    attributes = summary.attributes or {}
    assert attributes["crux.thread_id"] == thread_id
    assert attributes["crux.summary.reused"] is False
    assert int(str(attributes["crux.summary.tokens"])) > 0
    assert "RunWorkflow:SummaryWorkflow" in [span.name for span in spans]
    managed_plan = [
        s
        for s in spans
        if s.name == "crux.plan"
        and (s.attributes or {}).get("crux.generation_id") == "otel-managed"
    ]
    assert [tuple((s.attributes or {})["crux.plan.adaptation_kinds"]) for s in managed_plan] == [  # type: ignore[arg-type]
        ("summary",)
    ]
    assert telemetry.total("crux.adaptations", representation="summary") == 1
    assert telemetry.total("crux.summary.preparations", outcome="prepared") == 1
    assert telemetry.total("crux.turns.committed", status="selected") == 7
    assert _assert_content_free(telemetry) > 100


def test_telemetry_is_off_and_free_unless_configured(client: Client) -> None:
    setup.reset()
    assert not setup.enabled()
    assert setup.tracing_interceptor() is None
    assert list(worker_interceptors(client)) == []
    with tracing.span("crux.plan", {"crux.request_id": "r"}) as span:
        assert span is None


async def test_a_failing_observer_never_fails_the_step_it_observes(
    client: Client,
    telemetry: Telemetry,
    pool: asyncpg.Pool,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: object) -> dict[str, Any]:
        raise KeyError("observer bug")

    for name in (ACTIVITY_INVOKE_MODEL, ACTIVITY_COMMIT_TURN):
        step = observing._STEPS[name]
        monkeypatch.setitem(
            observing._STEPS,
            name,
            dataclasses.replace(step, before=broken, after=broken),
        )
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        result = await worker.runtime.generate("hello", thread=f"otel-bug:{uuid.uuid4().hex[:6]}")
    assert result.thread_commit is not None
    names = {span.name for span in telemetry.finished()}
    assert {"invoke", "commit", "crux.plan"} <= names  # fallback names for the broken steps
