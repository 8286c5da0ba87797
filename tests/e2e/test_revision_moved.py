"""The Thread moving between read and dispatch costs a re-read, never the turn.

A tool round that blocks until another turn lands makes the race deterministic: the next
provider call of the generation is planned on a revision that is no longer current.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Literal

import asyncpg
import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

import crux
from activities import GenerationActivities, ProviderRegistry
from activities.skeleton import thread_ids_at
from contracts.activities import (
    CommitTurnInput,
    InvokeModelInput,
    InvokeModelResult,
    ResolveHistoryIdsInput,
)
from crux.config import Settings
from crux.errors import ThreadError
from crux.messages import Message
from crux.models import Usage, generation_key, workflow_id_for
from crux.prompts import PromptRegistry
from planner import ModelCatalog
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import GenerationStore, ThreadStore
from tests.helpers import new_worker, record_history, settings_for


def _blocking_tool(released: asyncio.Event, entered: asyncio.Event) -> crux.Tool:
    async def lookup(arguments: dict[str, Any]) -> str:
        entered.set()
        await released.wait()
        return "found"

    return crux.tool("lookup", lookup)


async def _race_a_tool_round(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    *,
    on_revision_moved: Literal["replan", "fail"],
) -> tuple[str, crux.Generation | BaseException, crux.Runtime]:
    released, entered = asyncio.Event(), asyncio.Event()
    tool = _blocking_tool(released, entered)
    assistant = crux.prompt(id="lookup", use=[tool])
    thread_id = f"moved:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="lookup")),
        TextReply(text="answer after the lookup"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[tool]) as worker:
        runtime = worker.runtime
        call = asyncio.ensure_future(
            runtime.generate(
                assistant,
                input="look it up",
                thread=thread_id,
                model="openai:gpt-4o",
                generation_id="slow",
                on_revision_moved=on_revision_moved,
            )
        )
        await asyncio.wait_for(entered.wait(), 20)
        # Another turn lands while the first generation is between two provider calls.
        await ThreadStore(pool).append(
            thread_id, [Message(id="other:user", role="user", content="meanwhile")]
        )
        released.set()
        try:
            outcome: crux.Generation | BaseException = await call
        except Exception as error:
            outcome = error
    return thread_id, outcome, runtime


async def test_a_moved_revision_is_read_again_and_planned_again_not_sent_stale(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id, outcome, runtime = await _race_a_tool_round(
        client, pool, database_url, openai_server, on_revision_moved="replan"
    )
    assert isinstance(outcome, crux.Generation), outcome
    # Two provider calls: the plan sealed on the old revision was never sent.
    assert len(openai_server.requests) == 2
    second_body = openai_server.requests[1].body
    assert [m["role"] for m in second_body["messages"]] == ["user", "user", "assistant", "tool"]
    first, second = (step.request for step in outcome.steps)
    assert second.previous_reason == "revision-moved"
    assert second.previous_request_id not in (None, first.id)
    assert second.previous_request_id is not None
    # The unsent plan is receipted too, linked to the call before it.
    unsent = await runtime.receipt(second.previous_request_id)
    assert unsent.previous_request_id == first.id
    inspection = await runtime.inspect(second)
    assert second.previous_request_id in inspection.linked_request_ids
    commit = outcome.thread_commit
    assert commit is not None
    # Read again after the other turn: the turn follows it, selected.
    assert commit.parent_id == "other:user"
    assert commit.status == "selected"
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [m.role for m in view.messages] == ["user", "user", "assistant", "tool", "assistant"]
    await record_history(client, workflow_id_for("slow", thread_id), "revision_moved")


async def test_the_strict_option_fails_before_any_provider_call(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    _, outcome, _ = await _race_a_tool_round(
        client, pool, database_url, openai_server, on_revision_moved="fail"
    )
    assert isinstance(outcome, ThreadError), outcome
    assert outcome.code == "identity_conflict"
    assert len(openai_server.requests) == 1


async def _activities(pool: asyncpg.Pool, database_url: str) -> GenerationActivities:
    settings = Settings.model_validate({"database_url": database_url})
    return GenerationActivities(
        threads=ThreadStore(pool),
        generations=GenerationStore(pool),
        providers=ProviderRegistry(settings, httpx.AsyncClient()),
        prompts=PromptRegistry(()),
        catalog=ModelCatalog.default(),
    )


@pytest.mark.parametrize("redact", [False, True])
async def test_output_staged_before_the_thread_moved_is_committed_after_the_observed_head(
    pool: asyncpg.Pool, database_url: str, redact: bool
) -> None:
    """The provider answered, then the worker died; meanwhile another turn landed."""
    threads, generations = ThreadStore(pool), GenerationStore(pool)
    activities = await _activities(pool, database_url)
    thread_id = f"staged:{uuid.uuid4().hex[:6]}"
    opened = await threads.append(
        thread_id,
        [
            Message(id="q0", role="user", content="first"),
            Message(id="a0", role="assistant", content="first answer"),
        ],
    )
    revision = await threads.revision(thread_id)
    head = opened.message_ids[-1]
    key = generation_key("g1", thread_id)
    await generations.stage(
        key, 0, "user", Message(id="gen:g1:user", role="user", content="q"), thread_id=thread_id
    )
    paid = InvokeModelResult(usage=Usage(input_tokens=9, output_tokens=3), finish_reason="stop",
                             output_tokens=3)  # fmt: skip
    await generations.stage(
        key,
        1,
        "output",
        Message(id="gen:g1:assistant", role="assistant", content="paid answer"),
        thread_id=thread_id,
        source_message_ids=["q0", "a0"],
        info=paid.model_dump(mode="json"),
    )
    await threads.append(thread_id, [Message(id="q1", role="user", content="landed first")])
    if redact:
        await threads.redact(thread_id, "a0")
    invoke = InvokeModelInput(
        generation_id="g1",
        attempt=1,
        thread_id=thread_id,
        revision=revision,
        history_source="thread",
        model="offline:echo",
        message_ranges=[(0, 2)],
    )
    if redact:
        # The redaction reached the staged output; the attempt is planned again instead.
        refused = await ActivityEnvironment().run(activities.invoke_model, invoke)
        assert refused.revision_moved and not refused.reused_staged_output
        assert await generations.get_staged(key, 1, "output") is None
        return
    reused = await ActivityEnvironment().run(activities.invoke_model, invoke)
    assert reused.reused_staged_output and not reused.revision_moved
    commit_input = CommitTurnInput(
        generation_id="g1",
        workflow_id=workflow_id_for("g1", thread_id),
        thread_id=thread_id,
        expected_head=head,
        accepted_attempt=1,
        history_source="thread",
    )
    committed = await ActivityEnvironment().run(activities.commit_turn, commit_input)
    commit = committed.outcome(commit_input).thread_commit
    assert commit is not None
    assert commit.parent_id == head
    assert commit.status == "alternative"
    [answer] = await threads.load_messages(thread_id, ["gen:g1:assistant"])
    assert answer.text == "paid answer"


async def test_an_unstaged_attempt_on_a_moved_revision_reports_moved_without_a_call(
    pool: asyncpg.Pool, database_url: str
) -> None:
    threads = ThreadStore(pool)
    activities = await _activities(pool, database_url)
    thread_id = f"unstaged:{uuid.uuid4().hex[:6]}"
    await threads.append(thread_id, [Message(id="q0", role="user", content="first")])
    revision = await threads.revision(thread_id)
    await threads.append(thread_id, [Message(id="a0", role="assistant", content="moved")])
    result = await ActivityEnvironment().run(
        activities.invoke_model,
        InvokeModelInput(
            generation_id="g2",
            attempt=1,
            thread_id=thread_id,
            revision=revision,
            history_source="thread",
            model="no-such-provider:model",  # resolving it would fail: no call is attempted
            message_ranges=[(0, 1)],
        ),
    )
    assert result.revision_moved
    assert result.usage == Usage()


async def test_many_turns_in_flight_per_thread_all_land_without_faults(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """No turn fails because another landed first (the strict option is off by default)."""
    threads = [f"busy:{n}:{uuid.uuid4().hex[:4]}" for n in range(6)]
    waves, in_flight = 4, 3
    async with new_worker(client, pool, settings_for(database_url)) as worker:

        async def converse(thread_id: str) -> list[crux.Generation]:
            # A sliding window: a new turn starts as soon as one lands, so reads keep
            # racing the commits of the turns still in flight.
            slots = asyncio.Semaphore(in_flight)
            prefix = thread_id.replace(":", "")

            async def turn(n: int) -> crux.Generation:
                async with slots:
                    return await worker.runtime.generate(
                        f"question {n}", thread=thread_id, generation_id=f"{prefix}-{n}"
                    )

            return list(await asyncio.gather(*(turn(n) for n in range(waves * in_flight))))

        conversations = await asyncio.gather(*(converse(t) for t in threads))
    store = ThreadStore(pool)
    for thread_id, landed in zip(threads, conversations, strict=True):
        assert len(landed) == waves * in_flight
        view = await store.read_history_view(thread_id)
        selected = [g for g in landed if g.thread_commit and g.thread_commit.status == "selected"]
        assert len(view.messages) == 2 * len(selected) >= 2 * waves
        for generation in landed:
            commit = generation.thread_commit
            assert commit is not None
            messages = await store.load_messages(thread_id, commit.message_ids)
            assert [m.role for m in messages] == ["user", "assistant"]


async def test_positions_name_messages_at_the_pinned_revision_and_on_the_observed_path(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """The skeleton carries no ids: positions map back to them, never across a move."""
    threads = ThreadStore(pool)
    activities = await _activities(pool, database_url)
    thread_id = f"positions:{uuid.uuid4().hex[:6]}"
    await threads.append(
        thread_id,
        [
            Message(id="q0", role="user", content="first"),
            Message(id="a0", role="assistant", content="first answer"),
        ],
    )
    revision = await threads.revision(thread_id)
    assert await thread_ids_at(
        threads, thread_id, owner="main", revision=revision, ranges=[(1, 2), (0, 1)]
    ) == ["a0", "q0"]
    await threads.append(thread_id, [Message(id="q1", role="user", content="landed later")])
    moved = await thread_ids_at(
        threads, thread_id, owner="main", revision=revision, ranges=[(0, 1)]
    )
    assert moved is None
    # A later turn extends the path: earlier positions keep naming the same messages.
    resolved = await activities.resolve_history_ids(
        ResolveHistoryIdsInput(thread_id=thread_id, positions=[1, 0, 2, 3])
    )
    assert resolved.ids == ["a0", "q0", "q1", None]
