"""Agents and step hooks on the real stack: precedence, a model switch, failures, restarts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux._worker import build_worker, worker_resources
from crux.messages import Message
from providers.loopback import (
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from providers.loopback._server import RecordedRequest
from storage import ThreadStore
from tests.helpers import closed_run, eventually, new_worker, settings_for

SECRET = "s3cret-hook-detail"


def _max_tokens(request: RecordedRequest) -> Any:
    body = request.body
    assert isinstance(body, dict)
    return body.get("max_completion_tokens", body.get("max_tokens"))


def _model(request: RecordedRequest) -> Any:
    assert isinstance(request.body, dict)
    return request.body["model"]


def _tool_names(request: RecordedRequest) -> list[str]:
    body = request.body
    assert isinstance(body, dict)
    return [str(entry["function"]["name"]) for entry in body.get("tools", [])]


def _weather() -> crux.Tool:
    return crux.tool(
        "get_weather",
        lambda arguments: {"city": arguments.get("city"), "forecast": "sunny"},
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )


async def test_call_overrides_agent_overrides_prompt(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    base = crux.prompt(id="support", input_budget={"optimize_at": 3_000, "max": 6_000})
    responder = crux.agent(
        id="support-responder",
        prompt=base,
        model="openai:gpt-4o-mini",
        input_budget={"max": 5_000},
        max_output_tokens=300,
    )
    openai_server.enqueue(
        TextReply(text="from the agent"),
        TextReply(text="from the call"),
        TextReply(text="streamed"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        by_agent = await worker.runtime.generate(responder, input="hi")
        by_call = await worker.runtime.generate(
            responder,
            input="hi",
            model="openai:gpt-4o",
            max_output_tokens=200,
            input_budget={"max": 4_000},
        )
        preview = await worker.runtime.preview(responder, input="hi")
        updates = [update async for update in worker.runtime.stream(responder, input="hi")]

    first, second, streamed = openai_server.requests
    assert (_model(streamed), _max_tokens(streamed)) == ("gpt-4o-mini", 300)
    committed = updates[-1]
    assert isinstance(committed, crux.StreamCommitted)
    assert committed.generation.steps[0].request.agent_id == "support-responder"
    # The agent's model and reserve over the runtime default; the call's over the agent's.
    assert (_model(first), _max_tokens(first)) == ("gpt-4o-mini", 300)
    assert (_model(second), _max_tokens(second)) == ("gpt-4o", 200)
    agent_receipt = by_agent.steps[0].request
    call_receipt = by_call.steps[0].request
    assert agent_receipt.agent_id == call_receipt.agent_id == "support-responder"
    assert agent_receipt.model == "openai:gpt-4o-mini"
    assert call_receipt.model == "openai:gpt-4o"
    # Budgets merge field by field: the agent's max over the prompt's, the call's over both;
    # the prompt's optimize_at survives each time.
    assert agent_receipt.max_input_tokens == 5_000
    assert call_receipt.max_input_tokens == 4_000
    inspection = await worker.runtime.inspect(call_receipt)
    assert inspection.optimize_at == 3_000
    assert agent_receipt.preparations == ()
    assert preview.model == "openai:gpt-4o-mini"
    assert preview.max_input_tokens == 5_000


async def test_prepare_step_switches_the_model_on_a_tool_round(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    seen: list[crux.StepContext] = []

    @crux.step_hook("review-after-tools")
    def review(step: crux.StepContext) -> crux.StepOverrides | None:
        seen.append(step)
        if step.reason == "tool-round":
            return crux.StepOverrides.model_validate(
                {"model": "openai:gpt-4o", "max_output_tokens": 123, "settings": {"seed": 11}}
            )
        # The first call offers only the weather tool of the two.
        return crux.StepOverrides(active_tools=("get_weather",))

    weather = _weather()
    clock = crux.tool("get_time", lambda arguments: "noon")
    assistant = crux.agent(
        id="weather-agent",
        prompt=crux.prompt(id="weather", use=[weather, clock]),
        model="openai:gpt-4o-mini",
        prepare_step=review,
        settings={"temperature": 0.2},
    )
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="get_weather", arguments={"city": "Lisbon"})),
        TextReply(text="Sunny."),
    )
    thread_id = f"hooks:{uuid.uuid4().hex[:6]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[weather, clock], hooks=[review]) as worker:
        result = await worker.runtime.generate(
            assistant, input="Weather in Lisbon?", thread=thread_id
        )

    assert result.text == "Sunny."
    assert [_model(r) for r in openai_server.requests] == ["gpt-4o-mini", "gpt-4o"]
    assert _max_tokens(openai_server.requests[1]) == 123
    # Settings overrides merge over the agent's: its temperature stays, the seed is the hook's.
    bodies = [r.body for r in openai_server.requests]
    assert [(b or {}).get("temperature") for b in bodies] == [0.2, 0.2]
    assert [(b or {}).get("seed") for b in bodies] == [None, 11]
    offered = [_tool_names(r) for r in openai_server.requests]
    assert offered == [["get_weather"], ["get_weather", "get_time"]]
    assert [(s.reason, s.step) for s in seen] == [("initial", 1), ("tool-round", 2)]
    assert seen[1].tools_called == ("get_weather",)
    assert seen[1].usage.input_tokens > 0
    assert seen[1].model == "openai:gpt-4o-mini"
    first, second = (step.request for step in result.steps)
    assert second.model == "openai:gpt-4o"
    [initial] = first.preparations
    assert (initial.hook, initial.reason, initial.overridden) == (
        "review-after-tools",
        "initial",
        ("active_tools",),
    )
    assert initial.active_tools == ("get_weather",)
    [switch] = second.preparations
    assert switch.reason == "tool-round"
    assert switch.overridden == ("model", "max_output_tokens", "settings")
    assert second.settings is not None
    assert (second.settings.temperature, second.settings.seed) == (0.2, 11)
    assert switch.model == "openai:gpt-4o"
    assert switch.new_epoch is True
    assert second.previous_request_id == first.id
    first_inspection = await worker.runtime.inspect(first)
    second_inspection = await worker.runtime.inspect(second)
    assert first_inspection.epoch_key != second_inspection.epoch_key
    # The stored receipt says the same, from PostgreSQL.
    stored = await worker.runtime.receipt(second.id)
    assert stored.preparations == second.preparations
    # Temporal history holds ids, names and figures: no prompt, reply or tool argument text.
    workflow_id = crux.workflow_id_for(result.generation_id, thread_id)
    history = await (await closed_run(client, workflow_id)).fetch_history()
    recorded = history.to_json()
    assert "crux.prepare_step" in recorded
    for text in ("Weather in Lisbon?", "Lisbon", "Sunny.", "sunny"):
        assert text not in recorded


async def test_a_hook_that_raises_fails_the_run_typed_and_content_free(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    def broken(step: crux.StepContext) -> None:
        raise RuntimeError(SECRET)

    hook = crux.step_hook("broken", broken)
    bad_tools = crux.step_hook("bad-tools", lambda step: {"active_tools": ["not_offered"]})
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, hooks=[hook, bad_tools]) as worker:
        agent = crux.agent(
            id="fragile", prompt=crux.prompt(id="p"), model="openai:gpt-4o", prepare_step=hook
        )
        with pytest.raises(crux.PreparationError) as raised:
            await worker.runtime.generate(agent, input="hi")
        assert raised.value.code == "hook_failed"
        assert SECRET not in str(raised.value)
        misnamed = crux.agent(
            id="misnamed", prompt=crux.prompt(id="p"), model="openai:gpt-4o", prepare_step="nope"
        )
        with pytest.raises(crux.PreparationError) as unknown:
            await worker.runtime.generate(misnamed, input="hi")
        assert unknown.value.code == "hook_not_registered"
        narrowing = crux.agent(
            id="narrowing",
            prompt=crux.prompt(id="p"),
            model="openai:gpt-4o",
            prepare_step=bad_tools,
        )
        with pytest.raises(crux.ConfigurationError):
            await worker.runtime.generate(narrowing, input="hi")
    # Nothing was sent: every failure came before the provider call.
    assert openai_server.requests == []


async def test_a_worker_restart_between_steps_keeps_the_hook_decision(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    calls: list[str] = []

    def switch(step: crux.StepContext) -> crux.StepOverrides | None:
        calls.append(step.reason)
        return crux.StepOverrides(model="openai:gpt-4o") if step.reason == "tool-round" else None

    hook = crux.step_hook("switch", switch)
    weather = _weather()
    task_queue = f"crux-hooks-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url).model_copy(
        update={"task_queue": task_queue}
    )
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"})),
        TextReply(text="lost with the first worker", delay_seconds=3.0),
        TextReply(text="answered after the restart"),
    )
    request = crux.GenerationInput(
        generation_id="h1",
        thread_id=f"hooks-restart:{uuid.uuid4().hex[:6]}",
        model="openai:gpt-4o-mini",
        input="Weather?",
        tools=["get_weather"],
        prepare_step="switch",
        agent_id="raw-client",
    )

    async def sent() -> int:
        return len(openai_server.requests)

    resources = worker_resources(settings, pool=pool, tools=[weather], hooks=[hook])
    async with resources as acts, build_worker(client, task_queue=task_queue, activities=acts):
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            request.start_payload(),
            id=crux.workflow_id_for("h1", request.thread_id),
            task_queue=task_queue,
        )
        await eventually(sent, lambda count: count == 2)
    # Leaving the block shut the first worker down while the second call was pending.
    resources = worker_resources(settings, pool=pool, tools=[weather], hooks=[hook])
    async with resources as acts, build_worker(client, task_queue=task_queue, activities=acts):
        await handle.result()

    # The hook ran once per step; the second worker replayed its decision from history.
    assert calls == ["initial", "tool-round"]
    assert [_model(r) for r in openai_server.requests] == ["gpt-4o-mini", "gpt-4o", "gpt-4o"]


async def test_prepare_step_runs_again_for_the_overflow_recovery_call(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    reasons: list[str] = []

    def note(step: crux.StepContext) -> None:
        reasons.append(step.reason)

    hook = crux.step_hook("note", note)
    faq = crux.droppable(crux.context("faq", "Frequently asked question. " * 200))
    agent = crux.agent(
        id="recovering",
        prompt=crux.prompt(id="faq", use=[faq]),
        model="openai:gpt-4o-mini",
        prepare_step=hook,
    )
    openai_server.enqueue(
        ErrorReply(status=400, code="context_length_exceeded", message="too long"),
        TextReply(text="recovered"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, hooks=[hook]) as worker:
        result = await worker.runtime.generate(agent, input="hi")

    assert result.text == "recovered"
    assert reasons == ["initial", "overflow-recovery"]
    [step] = result.steps
    [preparation] = step.request.preparations
    assert (preparation.reason, preparation.step) == ("overflow-recovery", 2)
    assert [a.contributor for a in step.request.adaptations] == ["faq"]


async def test_a_plan_superseded_by_a_moved_revision_keeps_its_hook_decision(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    reasons: list[str] = []
    released, entered = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any]) -> str:
        entered.set()
        await released.wait()
        return "found"

    def switch(step: crux.StepContext) -> crux.StepOverrides | None:
        reasons.append(step.reason)
        return crux.StepOverrides(model="openai:gpt-4o") if step.reason == "tool-round" else None

    tool = crux.tool("lookup", lookup)
    hook = crux.step_hook("switch-on-tools", switch)
    agent = crux.agent(
        id="racing",
        prompt=crux.prompt(id="lookup", use=[tool]),
        model="openai:gpt-4o-mini",
        prepare_step=hook,
    )
    thread_id = f"hooks-moved:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(tool_call_reply(ScriptedToolCall(name="lookup")), TextReply(text="ok"))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool], hooks=[hook]) as worker:
        call = asyncio.ensure_future(
            worker.runtime.generate(agent, input="look it up", thread=thread_id)
        )
        await asyncio.wait_for(entered.wait(), 20)
        # Another turn lands while the generation is between its two provider calls.
        await ThreadStore(pool).append(
            thread_id, [Message(id="other:user", role="user", content="meanwhile")]
        )
        released.set()
        result = await call
        second = result.steps[1].request
        assert second.previous_reason == "revision-moved"
        assert second.previous_request_id is not None
        unsent = await worker.runtime.receipt(second.previous_request_id)

    # The hook decided once for the call; the plan made again after the move reused it.
    assert reasons == ["initial", "tool-round"]
    assert [_model(r) for r in openai_server.requests] == ["gpt-4o-mini", "gpt-4o"]
    assert unsent.preparations == second.preparations
    assert [p.reason for p in second.preparations] == ["tool-round"]
    assert second.model == unsent.model == "openai:gpt-4o"


async def test_prepare_invocation_runs_once_per_composition_member(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    invocations: list[tuple[str, str]] = []

    def baseline(step: crux.StepContext) -> crux.StepOverrides:
        invocations.append((step.reason, step.generation_id))
        return crux.StepOverrides(model="openai:gpt-4o", max_output_tokens=77)

    hook = crux.step_hook("member-baseline", baseline)
    member = crux.agent(
        id="member",
        prompt=crux.prompt(id="member"),
        model="openai:gpt-4o-mini",
        prepare_invocation=hook,
    )
    openai_server.enqueue(TextReply(text="one"), TextReply(text="two"))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, hooks=[hook]) as worker:
        run = await worker.runtime.parallel(
            id=f"hooks-parallel-{uuid.uuid4().hex[:6]}",
            context="hi",
            agents={"first": member, "second": member},
        )
        # The same agent run on its own is no composition child: the hook does not run.
        openai_server.enqueue(TextReply(text="alone"))
        alone = await worker.runtime.generate(member, input="hi")

    assert sorted(reason for reason, _ in invocations) == ["invocation", "invocation"]
    assert len({generation for _, generation in invocations}) == 2
    sent = openai_server.requests
    assert sorted((_model(r), _max_tokens(r)) for r in sent[:2]) == [("gpt-4o", 77)] * 2
    assert (_model(sent[2]), alone.steps[0].request.preparations) == ("gpt-4o-mini", ())
    for generation in run.generations.values():
        [preparation] = generation.steps[0].request.preparations
        assert (preparation.kind, preparation.hook) == ("invocation", "member-baseline")
        assert preparation.overridden == ("model", "max_output_tokens")
        assert generation.steps[0].request.model == "openai:gpt-4o"
