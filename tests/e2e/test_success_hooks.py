"""Success hooks: after the commit, at least once, never for an uncommitted turn.

Hooks are registered on the worker by name and named by the generation (`on_success=`);
each runs as its own activity once the turn is published. A hook that keeps failing is
reported (`Generation.hooks`, the run's final details) and never undoes the commit.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from contracts.generation import GenerationOutcome
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import new_worker, settings_for, workflow_metadata
from vocabulary.ids import generation_key, workflow_id_for

MODEL = "openai:gpt-4o-mini"


async def _committed_roles(pool: asyncpg.Pool, thread_id: str) -> list[str]:
    try:
        snapshot = await ThreadStore(pool).read(thread_id)
    except crux.ThreadError as error:
        if error.code == "not_found":
            return []
        raise
    return [entry.role for entry in snapshot.entries if isinstance(entry, crux.MessageEntry)]


async def test_a_success_hook_runs_once_after_the_commit(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"hooks:{uuid.uuid4().hex[:6]}"
    seen: list[tuple[crux.SuccessContext, list[str]]] = []

    @crux.success_hook("notify")
    async def notify(turn: crux.SuccessContext) -> None:
        # What the Thread holds when the hook runs: the turn is already committed.
        seen.append((turn, await _committed_roles(pool, thread_id)))

    openai_server.enqueue(TextReply(text="Done."))
    async with new_worker(client, pool, settings, success_hooks=[notify]) as worker:
        result = await worker.runtime.generate(
            "Close the ticket",
            thread=thread_id,
            model=MODEL,
            generation_id="g1",
            on_success=[notify],
        )
        replay = await worker.runtime.generate(
            "Close the ticket",
            thread=thread_id,
            model=MODEL,
            generation_id="g1",
            on_success=[notify],
        )
    [(context, roles)] = seen
    assert roles == ["user", "assistant"]
    assert context.hook == "notify" and context.attempt == 1
    assert context.generation_id == "g1"
    assert context.idempotency_key == generation_key("g1", thread_id)
    assert context.output_message_id == result.message.id
    assert context.commit_status == "selected"
    assert result.hooks["notify"].status == "ok"
    assert result.hooks["notify"].attempts == 1
    # The replay returns the committed turn; its hooks ran with the run that committed it.
    assert replay.result.replayed and replay.hooks == {}
    assert len(seen) == 1


async def test_a_hook_never_runs_for_an_uncommitted_turn(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"hooks-failed:{uuid.uuid4().hex[:6]}"
    calls: list[str] = []
    hook = crux.success_hook("notify", lambda turn: calls.append(turn.generation_id))
    openai_server.enqueue(TextReply(text="no marker"))
    async with new_worker(client, pool, settings, success_hooks=[hook]) as worker:
        with pytest.raises(crux.SafetyError):
            await worker.runtime.generate(
                "blocked word", thread=thread_id, model=MODEL, on_success=["notify"],
                safety=[crux.safety.deny(["blocked"])],
            )  # fmt: skip
        with pytest.raises(crux.ConstraintError):
            await worker.runtime.generate(
                "hello", thread=thread_id, model=MODEL, on_success=["notify"],
                constraints=crux.constraints(crux.constraints.require("marker!"), max_retries=0),
            )  # fmt: skip
    assert calls == []
    assert await _committed_roles(pool, thread_id) == []


async def test_a_failing_hook_is_visible_and_never_undoes_the_commit(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"hooks-broken:{uuid.uuid4().hex[:6]}"
    tries: list[int] = []

    def broken(turn: crux.SuccessContext) -> None:
        tries.append(turn.attempt)
        raise RuntimeError("zq-canary-hook-secret")

    hooks = [crux.success_hook("broken", broken), crux.success_hook("fine", lambda turn: None)]
    openai_server.enqueue(TextReply(text="Committed anyway."))
    async with new_worker(client, pool, settings, success_hooks=hooks) as worker:
        result = await worker.runtime.generate(
            "Go",
            thread=thread_id,
            model=MODEL,
            generation_id="broken-1",
            on_success=["broken", "fine", "unknown"],
        )
        handle = client.get_workflow_handle(workflow_id_for("broken-1", thread_id))
        metadata = await workflow_metadata(handle)
        stage = await handle.query("get_stage")
    assert result.text == "Committed anyway."
    assert await _committed_roles(pool, thread_id) == ["user", "assistant"]
    broken_outcome = result.hooks["broken"]
    assert (broken_outcome.status, broken_outcome.error_type) == ("failed", "RuntimeError")
    assert broken_outcome.attempts == len(tries) == 4
    assert tries == [1, 2, 3, 4]
    assert result.hooks["fine"].status == "ok"
    assert (result.hooks["unknown"].status, result.hooks["unknown"].error_type) == (
        "failed",
        "not_registered",
    )
    assert stage == "completed"
    assert (
        "success hooks: broken failed (RuntimeError), fine ok, unknown failed (not_registered)"
        in metadata.current_details
    )
    history = await handle.fetch_history()
    assert "zq-canary-hook-secret" not in history.to_json()


async def test_a_plain_client_names_hooks_and_reads_their_outcomes(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    keys: list[str] = []
    hook = crux.success_hook("audit", lambda turn: keys.append(turn.idempotency_key))
    openai_server.enqueue(TextReply(text="ok"))
    async with new_worker(client, pool, settings, success_hooks=[hook]) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": "plain-hook", "model": MODEL, "input": "hi", "on_success": ["audit"]},
            id=workflow_id_for("plain-hook", None),
            task_queue=worker.task_queue,
        )
    outcome = GenerationOutcome.model_validate(raw)
    assert [(h.hook, h.status) for h in outcome.hooks] == [("audit", "ok")]
    assert keys == ["plain-hook"]


async def test_the_most_specific_hooks_and_constraints_win(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    ran: list[tuple[str, str]] = []
    hooks = [
        crux.success_hook(name, lambda turn: ran.append((turn.hook, turn.generation_id)))
        for name in ("prompt-hook", "agent-hook")
    ]
    prompt = crux.prompt(
        id="ticket-bot",
        on_success=["prompt-hook"],
        constraints=[crux.constraints.require("Ticket:")],
    )
    agent = crux.agent(id="ticket-agent", prompt=prompt, on_success=["agent-hook"], constraints=[])
    openai_server.enqueue(
        TextReply(text="Ticket: 1"), TextReply(text="no marker"), TextReply(text="plain")
    )
    async with new_worker(client, pool, settings, success_hooks=hooks) as worker:
        # The prompt's hook and constraint.
        await worker.runtime.generate(prompt, input="a", model=MODEL, generation_id="p1")
        # The agent's replace them: another hook, no constraint (the reply has no marker).
        await worker.runtime.generate(agent, input="b", model=MODEL, generation_id="a1")
        # The call's replace both: no hook at all.
        plain = await worker.runtime.generate(
            agent, input="c", model=MODEL, generation_id="c1", on_success=[]
        )
    assert ran == [("prompt-hook", "p1"), ("agent-hook", "a1")]
    assert plain.hooks == {}
