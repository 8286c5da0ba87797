"""Structured output on the real stack: measured, sent natively, validated, retried, typed.

A reply that fails validation is never staged: its text must not reach Temporal history,
PostgreSQL, the logs or a receipt, and the retry is a new planned call linked to the
rejected one (reason `validation-retry`, a new epoch).
"""

from __future__ import annotations

import base64
import json
import uuid

import asyncpg
import pytest
from pydantic import BaseModel, field_validator
from temporalio.client import Client

import crux
from crux import MessageEntry
from planner import RequestInspection
from providers.loopback import (
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage import ThreadStore
from tests.helpers import closed_run, new_worker, settings_for
from vocabulary.ids import workflow_id_for

CANARY = "zq-canary-reject-5c1e"


class Forecast(BaseModel):
    """A weather forecast."""

    city: str
    high: int
    summary: str


def _rejected(variant: int) -> str:
    if variant == 0:
        return f"Sure! Here it is: {CANARY}"  # not JSON at all
    return json.dumps({"city": CANARY, "high": "warm", CANARY: 1})  # wrong type, extra key


async def _history_text(client: Client, workflow_id: str) -> str:
    """Every payload of a workflow's history, decoded, plus the raw history JSON."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    raw = json.dumps(history.to_json_dict())
    decoded: list[str] = [raw]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, str):
                decoded.append(base64.b64decode(data).decode("utf-8", "replace"))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(history.to_json_dict())
    return "\n".join(decoded)


async def _roles(pool: asyncpg.Pool, thread_id: str) -> list[str]:
    """The roles of the Thread's selected path (none when it was never written)."""
    try:
        snapshot = await ThreadStore(pool).read(thread_id)
    except crux.ThreadError as error:
        if error.code == "not_found":
            return []
        raise
    return [entry.role for entry in snapshot.entries if isinstance(entry, MessageEntry)]


def _schema_tokens(inspection: RequestInspection) -> int:
    return sum(
        entry.tokens
        for entry in inspection.breakdown.contributions
        if entry.name == "output-schema"
    )


async def _database_text(pool: asyncpg.Pool) -> str:
    """Every row of every table of the database's public schema, as text."""
    async with pool.acquire() as connection:
        tables = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        rows: list[str] = []
        for table in tables:
            name = table["tablename"]
            dumped = await connection.fetch(f'SELECT t::text AS row FROM "{name}" t')
            rows.extend(str(row["row"]) for row in dumped)
    return "\n".join(rows)


async def test_a_reply_failing_validation_twice_is_retried_and_never_kept(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    thread_id = f"output:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text=_rejected(0)),
        TextReply(text=_rejected(1)),
        TextReply(text=json.dumps({"city": "Oslo", "high": 12, "summary": "Clear."})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "Forecast for Oslo?",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            output=Forecast,
            generation_id="forecast-1",
        )
        roles = await _roles(pool, thread_id)
        history = await _history_text(client, workflow_id_for("forecast-1", thread_id))
        receipts = [await worker.runtime.receipt(step.request.id) for step in result.steps]
        inspections = [await worker.runtime.inspect(receipt) for receipt in receipts]

    assert result.output == Forecast(city="Oslo", high=12, summary="Clear.")
    # Three provider calls, each sent the schema natively.
    assert len(openai_server.requests) == 3
    for request in openai_server.requests:
        sent = request.body["response_format"]
        assert sent["type"] == "json_schema"
        assert sent["json_schema"]["name"] == "Forecast"
        assert sent["json_schema"]["schema"]["required"] == ["city", "high", "summary"]
    # Three linked receipts: each retry names the rejected call and why, in a new epoch.
    assert len(receipts) == 3
    first, second, third = receipts
    assert first.previous_request_id is None
    assert (second.previous_request_id, second.previous_reason) == (first.id, "validation-retry")
    assert (third.previous_request_id, third.previous_reason) == (second.id, "validation-retry")
    assert all(_schema_tokens(i) > 0 for i in inspections)
    assert [step.finish_reason for step in result.steps][:2] == ["invalid-output"] * 2
    # One committed turn: the user message and the accepted answer, nothing rejected.
    assert roles == ["user", "assistant"]
    assert result.result.thread_commit is not None
    # The rejected text is nowhere: history, database, logs, receipts.
    assert CANARY not in history
    assert CANARY not in await _database_text(pool)
    logs = capfd.readouterr()
    assert CANARY not in logs.out + logs.err
    assert all(CANARY not in r.model_dump_json() for r in receipts)


async def test_exhausted_retries_fail_typed_with_paths_and_commit_nothing(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"output:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text=_rejected(1)), TextReply(text=_rejected(1)))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.OutputValidationError) as caught:
            await worker.runtime.generate(
                "Forecast?",
                thread=thread_id,
                model="openai:gpt-4o-mini",
                output=crux.output(Forecast, max_retries=1),
            )
        roles = await _roles(pool, thread_id)
    error = caught.value
    assert error.attempts == 2
    assert "$.high: type" in error.defects
    assert "$: required" in error.defects
    # The undeclared key is reply content: it shows only as `*`.
    assert all(CANARY not in defect for defect in error.defects)
    assert CANARY not in str(error)
    assert roles == []
    assert CANARY not in await _database_text(pool)


async def test_anthropic_receives_the_schema_natively_and_a_json_schema_gives_json(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    schema = {
        "type": "object",
        "title": "Verdict",
        "properties": {"ok": {"type": "boolean"}, "score": {"type": "integer"}},
        "required": ["ok", "score"],
        "additionalProperties": False,
    }
    async with LoopbackAnthropicServer() as anthropic_server:
        anthropic_server.enqueue(TextReply(text=json.dumps({"ok": True, "score": 7})))
        settings = settings_for(database_url, anthropic_base_url=anthropic_server.base_url)
        async with new_worker(client, pool, settings) as worker:
            preview = await worker.runtime.preview(
                "Judge.", model="anthropic:claude-sonnet-4-5", output=schema
            )
            result = await worker.runtime.generate(
                "Judge.", model="anthropic:claude-sonnet-4-5", output=schema
            )
            inspection = await worker.runtime.inspect(result.steps[0].request)
            plain = await worker.runtime.preview("Judge.", model="anthropic:claude-sonnet-4-5")
    assert result.output == {"ok": True, "score": 7}
    [request] = anthropic_server.requests
    assert request.body["output_config"]["format"]["schema"] == schema
    # Measured as part of the request, by the run and by preview alike.
    assert _schema_tokens(inspection) > 0
    assert preview.input_tokens == result.steps[0].request.input_tokens
    assert plain.input_tokens is not None and preview.input_tokens is not None
    assert preview.input_tokens - plain.input_tokens >= _schema_tokens(inspection)


async def test_tool_rounds_are_not_validated_and_the_final_answer_is(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    @crux.tool
    def lookup(city: str) -> dict[str, int]:
        """Look up the temperature.

        Args:
            city: The city.
        """
        return {"high": 9}

    assistant = crux.prompt(id="forecaster", use=[lookup], output=Forecast)
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="lookup", arguments={"city": "Bergen"})),
        TextReply(text=json.dumps({"city": "Bergen", "high": 9, "summary": "Rain."})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[lookup]) as worker:
        result = await worker.runtime.generate(
            assistant,
            input="Bergen?",
            thread=f"output:{uuid.uuid4().hex[:6]}",
            model="openai:gpt-4o-mini",
        )
    assert result.output == Forecast(city="Bergen", high=9, summary="Rain.")
    assert len(result.steps) == 2


@pytest.mark.parametrize(
    "bad",
    [
        42,
        "a schema",
        {"type": "string"},
        {"type": "object", "properties": 3},
        {"type": "object", "x": float("nan")},
    ],
)
async def test_nonsense_output_is_refused_typed_before_anything_runs(bad: object) -> None:
    with pytest.raises(crux.ConfigurationError):
        crux.prompt(id="p", output=bad)  # pyright: ignore[reportArgumentType]


async def test_prepare_step_switches_the_model_on_a_validation_retry(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    seen: list[tuple[str, int]] = []

    @crux.step_hook("stronger-on-retry")
    def stronger(step: crux.StepContext) -> crux.StepOverrides | None:
        seen.append((step.reason, step.step))
        if step.reason == "validation-retry":
            return crux.StepOverrides(model="openai:gpt-4o")
        return None

    forecaster = crux.agent(
        id="forecaster",
        prompt=crux.prompt(id="forecast"),
        model="openai:gpt-4o-mini",
        output=Forecast,
        prepare_step=stronger,
    )
    openai_server.enqueue(
        TextReply(text=_rejected(0)),
        TextReply(text=json.dumps({"city": "Rome", "high": 24, "summary": "Hot."})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, hooks=[stronger]) as worker:
        result = await worker.runtime.generate(
            forecaster, input="Rome?", thread=f"output:{uuid.uuid4().hex[:6]}"
        )
        first, second = (step.request for step in result.steps)
        inspections = [await worker.runtime.inspect(first), await worker.runtime.inspect(second)]

    assert result.output == Forecast(city="Rome", high=24, summary="Hot.")
    assert seen == [("initial", 1), ("validation-retry", 2)]
    assert [request.body["model"] for request in openai_server.requests] == [
        "gpt-4o-mini",
        "gpt-4o",
    ]
    assert (second.previous_request_id, second.previous_reason) == (first.id, "validation-retry")
    [switch] = second.preparations
    assert (switch.reason, switch.model, switch.new_epoch) == (
        "validation-retry",
        "openai:gpt-4o",
        True,
    )
    assert inspections[0].epoch_key != inspections[1].epoch_key
    assert second.agent_id == "forecaster"


async def test_a_streamed_reply_failing_validation_leaves_no_deltas(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        TextReply(text=_rejected(0)),
        TextReply(text=json.dumps({"city": "Nice", "high": 20, "summary": "Mild."})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        updates = [
            update
            async for update in worker.runtime.stream(
                "Nice?",
                thread=f"output:{uuid.uuid4().hex[:6]}",
                model="openai:gpt-4o-mini",
                output=Forecast,
            )
        ]
    [committed] = [u for u in updates if isinstance(u, crux.StreamCommitted)]
    assert committed.generation.output == Forecast(city="Nice", high=20, summary="Mild.")
    assert CANARY not in await _database_text(pool)


class Reading(BaseModel):
    """A sensor reading; the range rule lives in code, not in the JSON schema."""

    celsius: int

    @field_validator("celsius")
    @classmethod
    def _plausible(cls, value: int) -> int:
        if not -90 <= value <= 60:
            raise ValueError("implausible")
        return value


async def test_a_registered_prompts_pydantic_model_validates_on_the_worker(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    sensor = crux.prompt(id="sensor", output=Reading)
    thread_id = f"output:{uuid.uuid4().hex[:6]}"
    # The schema accepts 4000; only the model's validator refuses it, on the worker, so
    # the implausible reply is retried before anything is committed.
    openai_server.enqueue(
        TextReply(text=json.dumps({"celsius": 4000})),
        TextReply(text=json.dumps({"celsius": 21})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, prompts=[sensor]) as worker:
        result = await worker.runtime.generate(
            sensor, input="Read it.", thread=thread_id, model="openai:gpt-4o-mini"
        )
        roles = await _roles(pool, thread_id)
    assert result.output == Reading(celsius=21)
    assert [step.finish_reason for step in result.steps] == ["invalid-output", "stop"]
    assert roles == ["user", "assistant"]


async def test_parallel_members_share_the_calls_output_and_return_it_typed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        TextReply(text=json.dumps({"city": "Oslo", "high": 3, "summary": "Snow."})),
        TextReply(text=json.dumps({"city": "Oslo", "high": 3, "summary": "Snow."})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        run = await worker.runtime.parallel(
            id=f"forecasts-{uuid.uuid4().hex[:6]}",
            context="Oslo?",
            agents={"a": crux.prompt(id="a"), "b": crux.prompt(id="b")},
            model="openai:gpt-4o-mini",
            output=Forecast,
        )
    assert not run.errors
    assert {name: run[name].output for name in ("a", "b")} == {
        "a": Forecast(city="Oslo", high=3, summary="Snow."),
        "b": Forecast(city="Oslo", high=3, summary="Snow."),
    }
    assert all("response_format" in request.body for request in openai_server.requests)
