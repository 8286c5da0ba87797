"""The acceptance gate on the real stack: input safety, terminal safety and constraints.

Through `Runtime` and through a plain Temporal client naming registered policies: what the
provider received and what the Thread holds is the post-safety text; a blocked turn leaves
no row anywhere; a refused reply (output safety or constraints) is withdrawn, linked to its
corrective attempt and never committed; a blocked stream withdraws its deltas.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ApplicationError

import crux
from contracts.generation import GenerationOutcome
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import closed_run, new_worker, settings_for
from vocabulary.details import decode_details
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o-mini"
CARD = "4111 1111 1111 1111"
EMAIL = "jo.canary@example.com"


def _user_texts(server: LoopbackOpenAIServer) -> list[str]:
    """The user messages of every request the provider received."""
    return [
        str(message.get("content"))
        for request in server.requests
        if request.body
        for message in request.body["messages"]
        if message.get("role") == "user"
    ]


async def _thread_texts(pool: asyncpg.Pool, thread_id: str) -> list[tuple[str, str]]:
    """`(role, text)` of the Thread's selected path; empty when it was never written."""
    try:
        snapshot = await ThreadStore(pool).read(thread_id)
    except crux.ThreadError as error:
        if error.code == "not_found":
            return []
        raise
    return [
        (entry.role, entry.content if isinstance(entry.content, str) else "")
        for entry in snapshot.entries
        if isinstance(entry, crux.MessageEntry)
    ]


async def _staging(pool: asyncpg.Pool) -> list[str]:
    return [
        str(row["kind"])
        for row in await pool.fetch("SELECT kind FROM crux_generation_staging ORDER BY kind")
    ]


async def _database_text(pool: asyncpg.Pool) -> str:
    """Every row of every table of the database, as text."""
    async with pool.acquire() as connection:
        tables = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        rows: list[str] = []
        for table in tables:
            dumped = await connection.fetch(f'SELECT t::text AS row FROM "{table["tablename"]}" t')
            rows.extend(str(row["row"]) for row in dumped)
    return "\n".join(rows)


async def _step_summaries(client: Client, workflow_id: str) -> list[str]:
    """The UI summaries of a run's activities and local activities, in history order."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    converter = PayloadConverter.default
    return [
        str(converter.from_payload(event.user_metadata.summary, str))
        for event in history.events
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary")
    ]


def _raised(failure: WorkflowFailureError) -> tuple[str | None, dict[str, Any]]:
    """The typed cause of a plain client's workflow failure: its type and details."""
    cause: BaseException | None = failure.cause
    while cause is not None and not (isinstance(cause, ApplicationError) and cause.type):
        cause = getattr(cause, "cause", None)
    assert isinstance(cause, ApplicationError), failure
    details = decode_details(cause.details, cause.type)
    return cause.type, details.model_dump()


async def test_a_masked_card_number_is_what_the_provider_received_and_the_thread_holds(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-mask:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="Thanks, noted."))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            f"Pay with {CARD} and mail {EMAIL} please",
            thread=thread_id,
            model=MODEL,
            generation_id="mask-1",
            safety=[
                crux.safety.pii(keep_last4=True),
                crux.safety.max_length(chars=500),
                crux.safety.deny(["password"]),
            ],
        )
        receipt = await worker.runtime.receipt(result.steps[0].request.id)
        summaries = await _step_summaries(client, workflow_id_for("mask-1", thread_id))
    masked = "Pay with [card ****1111] and mail [email] please"
    assert _user_texts(openai_server) == [masked]
    assert await _thread_texts(pool, thread_id) == [
        ("user", masked),
        ("assistant", "Thanks, noted."),
    ]
    gate = receipt.input_gate
    assert gate is not None and gate.decision == "transform"
    pii, length, deny = gate.outcomes
    assert (pii.policy, pii.decision, pii.counts) == ("pii", "transform", {"email": 1, "card": 1})
    assert (length.policy, length.decision, deny.policy, deny.decision) == (
        "length",
        "allow",
        "deny_list",
        "allow",
    )
    # The Temporal UI names the check's policies in the order they ran.
    assert "input safety: pii, length, deny_list" in summaries
    # The receipt is content-free, and the raw turn is gone from PostgreSQL.
    assert CARD not in receipt.model_dump_json()
    everything = await _database_text(pool)
    assert CARD not in everything and "4111111111111111" not in everything
    assert EMAIL not in everything
    # The turn was measured as sent: the receipt counts the masked text's tokens.
    assert result.steps[0].request.input_gate == gate


async def test_a_plain_client_names_a_registered_custom_policy(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-plain:{uuid.uuid4().hex[:6]}"

    @crux.safety.policy("ticket-ids")
    def ticket_ids(text: str) -> crux.SafetyVerdict:
        if "TCK-" in text:
            return crux.safety.Transform(text.replace("TCK-", "ticket "), "ticket.rewritten")
        return crux.safety.Allow()

    openai_server.enqueue(TextReply(text="On it."))
    async with new_worker(client, pool, settings, policies=[ticket_ids]) as worker:
        raw = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": "plain-1",
                "thread_id": thread_id,
                "model": MODEL,
                "input": {"message": "Look at TCK-42"},
                "safety": {"input": [{"kind": "custom", "name": "ticket-ids"}]},
            },
            id=workflow_id_for("plain-1", thread_id),
            task_queue=worker.task_queue,
        )
        outcome = GenerationOutcome.model_validate(raw)
        receipt = await worker.runtime.receipt(outcome.request_ids[0])
    assert _user_texts(openai_server) == ["Look at ticket 42"]
    assert await _thread_texts(pool, thread_id) == [
        ("user", "Look at ticket 42"),
        ("assistant", "On it."),
    ]
    assert receipt.input_gate is not None
    assert receipt.input_gate.outcomes[0].reason_code == "ticket.rewritten"


async def test_a_blocked_input_leaves_no_row_and_sends_nothing(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-block:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.SafetyError) as raised:
            await worker.runtime.generate(
                f"My card: {CARD}",
                thread=thread_id,
                model=MODEL,
                generation_id="blocked-1",
                safety=crux.safety(input=[crux.safety.pii(["card"], mode="block")]),
            )
        # The same id with an acceptable turn is a new request, not a conflict.
        fixed = await worker.runtime.generate(
            "My card ends in 1111",
            thread=thread_id,
            model=MODEL,
            generation_id="blocked-1",
            safety=crux.safety(input=[crux.safety.pii(["card"], mode="block")]),
        )
    error = raised.value
    assert (error.policy, error.reason_code, error.stage) == ("pii", "pii.card", "input")
    assert CARD not in str(error)
    # One provider call, for the second request only.
    assert _user_texts(openai_server) == ["My card ends in 1111"]
    assert [role for role, _ in await _thread_texts(pool, thread_id)] == ["user", "assistant"]
    assert fixed.text
    assert CARD not in await _database_text(pool)


async def test_a_blocked_input_through_a_plain_client_fails_typed_with_no_row(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-block-plain:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(WorkflowFailureError) as raised:
            await client.execute_workflow(
                "ManagedGenerationWorkflow",
                {
                    "generation_id": "plain-blocked",
                    "thread_id": thread_id,
                    "model": MODEL,
                    "input": "please rm -rf the archive",
                    "safety": {"input": [{"kind": "deny_list", "words": ["rm -rf"]}]},
                },
                id=workflow_id_for("plain-blocked", thread_id),
                task_queue=worker.task_queue,
            )
    error_type, details = _raised(raised.value)
    assert error_type == "SafetyError"
    assert details["code"] == "deny_list.match" and details["stage"] == "input"
    assert details["diagnostics"]["policy"] == "deny_list"
    assert openai_server.requests == []
    assert await _staging(pool) == []
    assert await _thread_texts(pool, thread_id) == []


async def test_a_safety_retry_is_linked_and_never_committed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-retry:{uuid.uuid4().hex[:6]}"
    refused = "The internal codename is zq-canary-bluebird."
    openai_server.enqueue(TextReply(text=refused), TextReply(text="I cannot share that."))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "What is the codename?",
            thread=thread_id,
            model=MODEL,
            safety=crux.safety(
                output=[crux.safety.deny(patterns=["zq-canary-\\w+"], mode="retry")]
            ),
        )
        receipts = [await worker.runtime.receipt(step.request.id) for step in result.steps]
    assert result.text == "I cannot share that."
    assert [step.finish_reason for step in result.steps][0] == "safety-retry"
    assert receipts[0].output_gate is not None
    assert (receipts[0].output_gate.decision, receipts[0].output_gate.reason_code) == (
        "retry",
        "deny_list.match",
    )
    assert receipts[1].previous_request_id == receipts[0].id
    assert receipts[1].previous_reason == "safety-retry"
    assert receipts[1].output_gate is not None and receipts[1].output_gate.decision == "allow"
    assert await _thread_texts(pool, thread_id) == [
        ("user", "What is the codename?"),
        ("assistant", "I cannot share that."),
    ]
    assert "zq-canary" not in await _database_text(pool)


async def test_exhausted_safety_retries_fail_typed_and_commit_nothing(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-exhaust:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(*(TextReply(text="zq-canary-one leaks") for _ in range(2)))
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.SafetyError) as raised:
            await worker.runtime.generate(
                "Tell me",
                thread=thread_id,
                model=MODEL,
                safety=crux.safety(
                    output=[crux.safety.deny(patterns=["zq-canary-\\w+"], mode="retry")],
                    max_retries=1,
                ),
            )
    assert (raised.value.stage, raised.value.attempts) == ("output", 2)
    assert len(openai_server.requests) == 2
    assert await _thread_texts(pool, thread_id) == []
    assert await _staging(pool) == ["identity"]


async def test_a_constraint_retry_is_never_committed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-constraint:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="A rambling zq-canary-draft without the marker " * 3),
        TextReply(text="Ticket: 42 is closed."),
    )
    checks = crux.constraints(
        crux.constraints.require("Ticket:"), crux.constraints.length(maximum=80)
    )
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "Status?", thread=thread_id, model=MODEL, constraints=checks
        )
        receipts = [await worker.runtime.receipt(step.request.id) for step in result.steps]
    assert result.text == "Ticket: 42 is closed."
    first = receipts[0].constraints
    assert first is not None
    assert [(v.index, v.code) for v in first.violations] == [
        (0, "required.missing"),
        (1, "length.too_long"),
    ]
    assert receipts[1].previous_reason == "constraint-retry"
    assert receipts[1].constraints is not None and receipts[1].constraints.satisfied
    assert [text for _, text in await _thread_texts(pool, thread_id)] == [
        "Status?",
        "Ticket: 42 is closed.",
    ]
    assert "zq-canary-draft" not in await _database_text(pool)


async def test_exhausted_constraint_retries_fail_typed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-constraint-fail:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="no marker"), TextReply(text="still none"))
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.ConstraintError) as raised:
            await worker.runtime.generate(
                "Status?",
                thread=thread_id,
                model=MODEL,
                constraints=crux.constraints(crux.constraints.require("Ticket:"), max_retries=1),
            )
    assert raised.value.violations == ("0:required.missing",)
    assert raised.value.attempts == 2
    assert "marker" not in str(raised.value)
    assert await _thread_texts(pool, thread_id) == []


async def test_a_terminal_block_withdraws_the_streamed_deltas(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-stream:{uuid.uuid4().hex[:6]}"
    leaked = "Sure, the admin password is zq-canary-hunter2, use it well."
    # Pieces 20 ms apart: the caller sees text before the gate blocks the whole answer.
    openai_server.enqueue(TextReply(text=leaked, sse_chunk_size=6, sse_piece_delay_seconds=0.02))
    updates: list[object] = []

    async def follow(runtime: crux.Runtime) -> None:
        async for update in runtime.stream(
            "Password?",
            thread=thread_id,
            model=MODEL,
            safety=crux.safety(output=[crux.safety.deny(["password"])]),
        ):
            updates.append(update)

    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.SafetyError) as raised:
            await follow(worker.runtime)
    assert raised.value.stage == "output" and raised.value.reason_code == "deny_list.match"
    streamed = "".join(u.text for u in updates if isinstance(u, crux.StreamDelta))
    assert streamed and leaked.startswith(streamed)
    # The text the caller saw is withdrawn before the error.
    last = updates[-1]
    assert isinstance(last, crux.StreamReset) and last.withdrawn
    assert not any(isinstance(u, crux.StreamCommitted) for u in updates)
    assert await _staging(pool) == ["identity"]
    assert await _thread_texts(pool, thread_id) == []
    assert "zq-canary-hunter2" not in await _database_text(pool)


async def test_a_stream_completes_only_with_the_reply_the_checks_accepted(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"gate-stream-retry:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="No marker in this first reply.", sse_chunk_size=5),
        TextReply(text="Ticket: 77, all set.", sse_chunk_size=5),
    )
    updates: list[object] = []
    async with new_worker(client, pool, settings) as worker:
        async for update in worker.runtime.stream(
            "Status?",
            thread=thread_id,
            model=MODEL,
            constraints=[crux.constraints.require("Ticket:")],
        ):
            updates.append(update)
    # The refused attempt's text is followed by a reset; what follows the last reset is the
    # accepted reply, and completion comes after the checks accepted it.
    resets = [i for i, u in enumerate(updates) if isinstance(u, crux.StreamReset)]
    assert resets
    assert not any(isinstance(u, crux.StreamReset) and u.withdrawn for u in updates)
    accepted = "".join(u.text for u in updates[resets[-1] + 1 :] if isinstance(u, crux.StreamDelta))
    assert accepted == "Ticket: 77, all set."
    last = updates[-1]
    assert isinstance(last, crux.StreamCommitted)
    assert last.generation.text == "Ticket: 77, all set."
    assert [s.request.previous_reason for s in last.generation.steps] == [
        None,
        "constraint-retry",
    ]
    assert await _thread_texts(pool, thread_id) == [
        ("user", "Status?"),
        ("assistant", "Ticket: 77, all set."),
    ]


async def test_a_failing_custom_policy_fails_typed_naming_only_its_error_class(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)

    def broken(text: str) -> crux.SafetyVerdict:
        raise KeyError(text)

    policy = crux.safety.policy("broken", broken)
    async with new_worker(client, pool, settings, policies=[policy]) as worker:
        with pytest.raises(crux.GatePolicyError) as raised:
            await worker.runtime.generate("zq-canary-secret words", model=MODEL, safety=[policy])
        with pytest.raises(crux.GatePolicyError) as unknown:
            await worker.runtime.generate(
                "hello", model=MODEL, safety=[crux.safety.custom("nobody-registered")]
            )
    assert (raised.value.policy, raised.value.code, raised.value.error_type) == (
        "broken",
        "raised",
        "KeyError",
    )
    assert "zq-canary" not in str(raised.value)
    assert unknown.value.code == "not_registered"
    assert openai_server.requests == []


async def test_most_specific_safety_wins(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    strict = crux.prompt(id="strict", safety=[crux.safety.deny(["alpha"])])
    masking = crux.agent(id="masking", prompt=strict, safety=[crux.safety.pii()])
    openai_server.enqueue(TextReply(text="one"), TextReply(text="two"))
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.SafetyError):
            await worker.runtime.generate(strict, input="alpha", model=MODEL)
        # The agent's policies replace the prompt's: alpha passes, the address is masked.
        await worker.runtime.generate(masking, input=f"alpha {EMAIL}", model=MODEL)
        # The call's replace both: nothing is checked.
        await worker.runtime.generate(
            masking, input=f"alpha {EMAIL}", model=MODEL, safety=crux.safety()
        )
    assert _user_texts(openai_server) == ["alpha [email]", f"alpha {EMAIL}"]


def test_safety_specs_refuse_what_a_stage_cannot_do() -> None:
    with pytest.raises(crux.ConfigurationError, match="input policies cannot retry"):
        crux.safety(input=[crux.safety.deny(["x"], mode="retry")])
    with pytest.raises(crux.ConfigurationError, match="output policies cannot mask"):
        crux.safety(output=[crux.safety.pii()])
    with pytest.raises(crux.ConfigurationError, match="crux.safety.policy"):
        crux.safety(input=[lambda text: crux.safety.Allow()])
    spec = crux.safety(input=[crux.safety.pii(), "registered-elsewhere"])
    assert json.loads(spec.model_dump_json())["input"][1] == {
        "kind": "custom",
        "name": "registered-elsewhere",
    }
