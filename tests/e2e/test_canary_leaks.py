"""One canary string through every content carrier, then searched for everywhere it must not be.

The canary is placed in Thread messages (appended, with metadata, and edited), the prompt input
and system text, context contributors (system and message placement, authored alternatives),
tool arguments and results (a valid call, invalid arguments, a tool that raises with it, a tool
name the model invented, a call waiting for approval), call-site messages that shadow a Thread,
a parallel run's shared context, structured output (rejected and accepted replies), summaries
(the summary model answers with it; one summary call is refused with it), provider error bodies
(4xx and 5xx of both wire formats, a malformed body, a stream cut by an error event), text
PostgreSQL cannot store (from the caller, the provider and a tool) and a step hook that raises
with it. Plain, tool-round, approval, streaming, summarised, parallel and failing generations
run on one worker.

Zero occurrences are then required in: every Temporal history of the run's workflows (raw
bytes, JSON, every payload decoded with the data converter), their memo, search attributes,
static summary and details, current details and every query answer (also while a run waits for
approval); every log record and every byte the worker process wrote to stdout/stderr; the dev
server's log; every receipt, inspection, ledger row and result; every typed error raised
(message, repr, attributes, the chain its traceback shows). Before erasure, PostgreSQL may hold
the canary only in the canonical and staged text tables; after redacting some Threads and
deleting the others, a `pg_dump` of the test's database holds it nowhere. A control id that
legitimately travels is found by the same scan, so the scan is not vacuous.

`CRUX_SOAK=1` runs every scenario five times and prints the figures.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import traceback
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel
from temporalio.client import Client

import crux
from crux.logs import configure_logging
from crux.models import workflow_id_for
from providers.loopback import (
    ErrorReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    RawReply,
    RecordedRequest,
    ScriptedToolCall,
    StreamErrorReply,
    TextReply,
    tool_call_reply,
)
from tests.helpers import RunningWorker, eventually, new_worker, settings_for
from tests.leaks import (
    LeakScan,
    RecordingHandler,
    check_workflow,
    dump_hits,
    wait_closed,
    workflows_since,
)

MODEL = "openai:gpt-4o-mini"
ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
# Tables that hold caller text until it is erased: canonical messages, staged turns and
# streamed deltas, and derived artifacts (summaries). Nothing else may ever hold the canary.
TEXT_TABLES = {
    "public.crux_thread_messages",
    "public.crux_generation_staging",
    "public.crux_derived_artifacts",
}
# Threads whose every message is redacted; the others are deleted. A call whose messages
# shadowed its Thread keeps its reply beside the Thread, not in it: only deleting the Thread
# erases that reply, so the shadowed Thread is deleted.
REDACTED = ("plain", "summary", "output", "approval")
ROUNDS = 5 if os.environ.get("CRUX_SOAK") == "1" else 1
"""Every scenario runs once in CI and five times under `make soak`."""
FAST_RETRY = {"max_attempts": 2, "initial_interval_seconds": 0.05, "max_interval_seconds": 0.1}


class Note(BaseModel):
    """A structured reply."""

    note: str
    rating: int


class Carriers:
    """Runs every kind of generation with the canary in it; collects what the caller got."""

    def __init__(
        self,
        client: Client,
        pool: asyncpg.Pool,
        worker: RunningWorker,
        canary: str,
        scan: LeakScan,
        since: datetime,
    ) -> None:
        self.client = client
        self.pool = pool
        self.task_queue = worker.task_queue
        self.since = since
        self.runtime = worker.runtime
        self.canary = canary
        self.scan = scan
        self.results: list[crux.Generation] = []
        self.threads: list[tuple[str, str]] = []
        """(scenario, Thread id) of every Thread the run wrote to."""
        self.unselected: dict[str, list[str]] = {}
        """Messages on branches the selected path no longer shows, per Thread."""
        self.errors = 0
        self.tools = canary_tools(canary)

    def thread(self, role: str) -> str:
        """A fresh Thread id for one scenario (ids are not content: no canary in them)."""
        thread_id = f"canary-{role}:{uuid.uuid4().hex[:8]}"
        self.threads.append((role, thread_id))
        return thread_id

    async def expect_error(self, where: str, call: Any, kind: type[crux.CruxError]) -> None:
        """Await `call`, which must fail typed; check everything the error carries."""
        with pytest.raises(kind) as caught:
            await call
        self.scan.check_error(f"error of {where}", caught.value)
        self.errors += 1

    async def generate(self, prompt: Any, **options: Any) -> crux.Generation:
        """`Runtime.generate`, keeping the result for the receipt checks."""
        result = await self.runtime.generate(prompt, model=options.pop("model", MODEL), **options)
        self.results.append(result)
        return result


def canary_hook(canary: str) -> crux.StepHook:
    """A step hook that fails with the canary in its message."""

    def refuse(step: crux.StepContext) -> None:
        raise RuntimeError(f"hook refused {step.step} {canary}")

    return crux.step_hook("canary-refuse", refuse)


def canary_tools(canary: str) -> list[crux.Tool]:
    """A typed tool whose result holds the canary, and one that raises with it."""

    @crux.tool
    async def lookup(query: str, limit: int = 3) -> str:
        """Look a code word up."""
        return f"found {query} ({limit}) -> {canary}"

    def explode(arguments: dict[str, Any]) -> str:
        raise RuntimeError(f"exploded on {arguments} {canary}")

    def poison(arguments: dict[str, Any]) -> str:
        return f"{canary} {arguments}\x00"

    def refund(arguments: dict[str, Any]) -> str:
        return f"refunded {arguments} {canary}"

    return [
        lookup,
        crux.tool("explode", explode),
        crux.tool("poison", poison),
        crux.tool("refund", refund, requires_approval=True),
    ]


async def _pending(runtime: crux.Runtime, generation_id: str, thread: str) -> list[Any]:
    """The calls a run waits on; none while it has not started waiting yet."""
    try:
        return list(await runtime.pending_approvals(generation_id, thread=thread))
    except crux.CruxError:
        return []


async def _append_conversation(pool: asyncpg.Pool, thread_id: str, canary: str, turns: int) -> None:
    conversation = crux.thread(id=thread_id, storage=pool)
    for turn in range(turns):
        await conversation.append(
            [
                {"role": "user", "content": f"Turn {turn}: my code word is {canary}, noted?"},
                {"role": "assistant", "content": f"Noted code word {canary} for turn {turn}."},
            ]
        )


async def _run_carriers(
    run: Carriers,
    pool: asyncpg.Pool,
    openai: LoopbackOpenAIServer,
    anthropic: LoopbackAnthropicServer,
) -> None:
    canary = run.canary
    # Plain: Thread messages, the prompt input and two context contributors.
    plain = run.thread("plain")
    await _append_conversation(pool, plain, canary, 1)
    conversation = crux.thread(id=plain, storage=pool)
    original = await conversation.append(
        {"role": "user", "content": f"Draft {canary}", "metadata": {"note": canary}}
    )
    [draft] = original.message_ids
    run.unselected[plain] = [draft]
    await conversation.edit(draft, content=f"Edited {canary}", metadata={"note": canary})
    policy = crux.prompt(
        id="canary-plain",
        system=f"You guard {canary}.",
        use=[
            crux.context("policy", f"Policy text {canary}", contract=True),
            crux.droppable(crux.context("faq", f"FAQ {canary}", placement="message")),
            crux.prefer(
                crux.context("guide", f"Guide {canary} " * 20),
                crux.context("guide-short", f"Guide {canary}"),
            ),
        ],
        prompt=lambda value: value["message"],
    )
    openai.enqueue(TextReply(text=f"Plain answer {canary}"))
    await run.generate(policy, input={"message": f"Question {canary}?"}, thread=plain)

    # Tool round: canary arguments, canary results, invalid arguments, a raising tool and a
    # tool name the model invented.
    tools = run.thread("tools")
    openai.enqueue(
        tool_call_reply(
            ScriptedToolCall(name="lookup", arguments={"query": canary}),
            ScriptedToolCall(name="lookup", arguments={"query": 7, "limit": canary}),
            ScriptedToolCall(name="explode", arguments={"why": canary}),
            ScriptedToolCall(name=f"invented_{canary[-12:]}", arguments={"q": canary}),
            text=f"Calling tools for {canary}",
        ),
        TextReply(text=f"Tools said {canary}"),
    )
    await run.generate(
        crux.prompt(id="canary-tools", use=canary_tools(canary)),
        input=f"Find {canary}",
        thread=tools,
    )

    # Approval: the call waits with the canary in its arguments; checked while it waits.
    approval = run.thread("approval")
    openai.enqueue(
        tool_call_reply(ScriptedToolCall(name="refund", arguments={"order": canary})),
        TextReply(text=f"Refund of {canary} was denied"),
    )
    turn = asyncio.create_task(
        run.generate(
            crux.prompt(
                id="canary-refund", use=[tool for tool in run.tools if tool.name == "refund"]
            ),
            input=f"Refund {canary}",
            thread=approval,
            generation_id="canary-approval",
        )
    )
    try:
        [call] = await eventually(
            lambda: _pending(run.runtime, "canary-approval", approval),
            lambda pending: len(pending) == 1,
        )
        await check_workflow(run.scan, run.client, workflow_id_for("canary-approval", approval))
        await run.runtime.deny(
            call.call_id, "canary-approval", thread=approval, reason_code="over_limit"
        )
    finally:
        run.results.append(await turn)

    # Call-site messages shadow the Thread: staged for the call, never committed to it.
    shadowed = run.thread("shadowed")
    await _append_conversation(pool, shadowed, canary, 1)
    await run.generate(
        f"Shadowed {canary}",
        thread=shadowed,
        messages=[
            {"role": "user", "content": f"Earlier {canary}"},
            {"role": "assistant", "content": f"Earlier reply {canary}"},
        ],
    )

    # A parallel run: the context every member renders holds the canary; one member's
    # provider refuses with it in the error body (that member's typed error is checked).
    def member(name: str) -> crux.Prompt:
        return crux.prompt(id=f"canary-{name}", prompt=lambda c: f"{name}: {c['message']}")

    members: dict[str, crux.Prompt | crux.Agent] = {
        "left": member("left"),
        "right": crux.agent(id="canary-right", prompt=member("right"), model=ANTHROPIC_MODEL),
    }
    anthropic.enqueue(ErrorReply(status=400, message=f"parallel {canary}"))
    parallel = await run.runtime.parallel(
        id=f"canary-parallel-{uuid.uuid4().hex[:8]}",
        context={"message": f"Shared {canary}"},
        agents=members,
        threads={name: run.thread(f"parallel-{name}") for name in members},
    )
    assert set(parallel.generations) == {"left"}
    assert set(parallel.errors) == {"right"}
    run.scan.check_error("error of a parallel member", parallel.errors["right"])
    run.results.extend(parallel.generations.values())
    assert anthropic.pending == 0

    # Streaming, in small SSE pieces.
    streamed = run.thread("stream")
    openai.enqueue(TextReply(text=f"Streamed {canary} and {canary} again.", sse_chunk_size=5))
    updates = [
        update
        async for update in run.runtime.stream(f"Stream {canary}", thread=streamed, model=MODEL)
    ]
    assert isinstance(updates[-1], crux.StreamCommitted)
    run.results.append(updates[-1].generation)

    # Structured output: one rejected reply, then an accepted one.
    structured = run.thread("output")
    openai.enqueue(
        TextReply(text=f"Not JSON at all: {canary}"),
        TextReply(text=json.dumps({"note": canary, "rating": 5})),
    )
    result = await run.generate(f"Rate {canary}", thread=structured, output=Note)
    assert result.output == Note(note=canary, rating=5)

    # Summarised: managed history over canary turns; the summary model echoes the canary
    # (the server's responder answers every unscripted call with it).
    summarised = run.thread("summary")
    await _append_conversation(pool, summarised, canary, 6)
    managed = crux.prompt(id="canary-managed", use=[crux.history(recent={"messages": 4})])
    result = await run.generate(
        managed,
        input=f"What was the code word? {canary}",
        thread=summarised,
        input_budget={"max": 250},
    )
    assert any(a.representation == "summary" for a in result.steps[0].request.adaptations)
    # A background refresh may follow; let it answer before replies are scripted again.
    await wait_closed(run.client, await workflows_since(run.client, run.task_queue, run.since))

    # A summary call the provider refuses, its error body holding the canary (the run may
    # still answer, from a retried call or without the summary: either way, nothing leaks).
    unsummarised = run.thread("summary-refused")
    await _append_conversation(pool, unsummarised, canary, 6)
    openai.enqueue(ErrorReply(status=400, message=f"cannot summarise {canary}"))
    try:
        await run.generate(
            managed, input=f"Again {canary}", thread=unsummarised, input_budget={"max": 250}
        )
    except crux.CruxError as error:
        run.scan.check_error("error of a refused summary", error)
    assert openai.pending == 0


async def _run_failures(
    run: Carriers, openai: LoopbackOpenAIServer, anthropic: LoopbackAnthropicServer
) -> None:
    canary = run.canary
    failing = run.thread("failing")
    poisoned = next(tool for tool in run.tools if tool.name == "poison")
    body = json.dumps({"error": {"message": f"upstream {canary}", "type": "server_error"}})
    cases: list[tuple[str, list[Any], type[crux.CruxError], dict[str, Any]]] = [
        ("400", [ErrorReply(status=400, message=f"bad {canary}")], crux.ProviderError, {}),
        ("500", [ErrorReply(status=500, body=body.encode())] * 2, crux.ProviderError, {}),
        ("malformed", [RawReply(body=f"not json {canary}".encode())], crux.ProviderError, {}),
        (
            "stream-error",
            [StreamErrorReply(text=f"partial {canary}", message=f"cut {canary}")] * 2,
            crux.ProviderError,
            {"stream": True},
        ),
        (
            "rejected-output",
            [TextReply(text=f'{{"note": 1, "{canary}": 2}}'), TextReply(text=canary)],
            crux.OutputValidationError,
            {"output": crux.output(Note, max_retries=1)},
        ),
    ]
    cases += [
        # Text PostgreSQL cannot store, from the provider or a tool: refused typed.
        ("NUL reply", [TextReply(text=f"{canary}\x00")], crux.ThreadError, {}),
        (
            "surrogate reply",
            [RawReply(body=_completion(f"{canary}\\ud800"))],
            crux.ThreadError,
            {},
        ),
        (
            "NUL tool result",
            [tool_call_reply(ScriptedToolCall(name="poison", arguments={"q": canary}))],
            crux.ThreadError,
            {"prompt": crux.prompt(id="canary-poison", use=[poisoned])},
        ),
    ]
    for name, replies, kind, options in cases:
        openai.enqueue(*replies)
        if options.pop("stream", False):
            call = _drain(
                run.runtime.stream(
                    f"Fail {canary}", thread=failing, model=MODEL, attempt_policy=FAST_RETRY
                )
            )
        else:
            call = run.runtime.generate(
                options.pop("prompt", f"Fail {name} {canary}"),
                input=f"Fail {name} {canary}",
                thread=failing,
                model=MODEL,
                attempt_policy=FAST_RETRY,
                **options,
            )
        await run.expect_error(name, call, kind)
        assert openai.pending == 0, name
    for status, attempts in ((401, 1), (529, 2)):
        anthropic.enqueue(*[ErrorReply(status=status, message=f"anthropic {canary}")] * attempts)
        call = run.runtime.generate(
            f"Fail {status} {canary}",
            thread=failing,
            model=ANTHROPIC_MODEL,
            attempt_policy=FAST_RETRY,
        )
        await run.expect_error(f"anthropic {status}", call, crux.ProviderError)
        assert anthropic.pending == 0, status
    # A step hook that raises: only the exception's type is reported.
    hooked = crux.agent(
        id="canary-hooked", prompt=crux.prompt(id="canary-hooked"), prepare_step=canary_hook(canary)
    )
    await run.expect_error(
        "hook",
        run.runtime.generate(hooked, input=f"Hook {canary}", thread=failing, model=MODEL),
        crux.PreparationError,
    )
    # Text PostgreSQL cannot store is refused typed before anything runs.
    await run.expect_error(
        "NUL input",
        run.runtime.generate(f"{canary}\x00", thread=failing, model=MODEL),
        crux.ThreadError,
    )
    await run.expect_error(
        "NUL append",
        crux.thread(id=failing, storage=run.pool).append(
            {"role": "user", "content": f"{canary}\x00"}
        ),
        crux.ThreadError,
    )
    # Malformed messages and edits are refused typed, without quoting what they held (a
    # pydantic error would: an undeclared field shows its value).
    malformed = [{"kind": "text", "text": "x", "note": canary}]
    conversation = crux.thread(id=failing, storage=run.pool)
    await run.expect_error(
        "malformed append",
        conversation.append({"role": "user", "content": malformed}),
        crux.ThreadError,
    )
    commit = await conversation.append({"role": "user", "content": f"Edit me {canary}"})
    await run.expect_error(
        "malformed edit",
        conversation.edit(
            commit.message_ids[0],
            content=malformed,  # pyright: ignore[reportArgumentType]
        ),
        crux.ThreadError,
    )
    # Anthropic answers too, so both adapters carried the canary.
    anthropic.enqueue(TextReply(text=f"Anthropic says {canary}"))
    await run.generate(f"Hello {canary}", thread=failing, model=ANTHROPIC_MODEL)


def _completion(raw_text: str) -> bytes:
    """A chat completion whose content is `raw_text` as written (JSON escapes kept)."""
    body = {
        "id": "chatcmpl-canary",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "CONTENT"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return json.dumps(body).replace("CONTENT", raw_text).encode()


async def _drain(stream: Any) -> None:
    async for _update in stream:
        pass


async def _check_receipts(run: Carriers, pool: asyncpg.Pool) -> int:
    """Every stored receipt and inspection, read through the facade and raw; every result."""
    rows = await pool.fetch("SELECT request_id, receipt, inspection FROM crux_request_receipts")
    for row in rows:
        run.scan.check(
            f"receipt row {row['request_id']}", str(row["receipt"]), str(row["inspection"])
        )
        stored = row["receipt"]
        if (json.loads(stored) if isinstance(stored, str) else stored).get(
            "kind"
        ) == "history-summary":
            continue  # a support call's receipt: checked as stored, it is no RequestReceipt
        receipt = await run.runtime.receipt(row["request_id"])
        inspection = await run.runtime.inspect(receipt)
        run.scan.check(
            f"receipt {row['request_id']}", receipt.model_dump_json(), inspection.model_dump_json()
        )
    ledger = await pool.fetch("SELECT generation_id, result FROM crux_generations")
    for row in ledger:
        run.scan.check(f"ledger {row['generation_id']}", str(row["result"]))
    for result in run.results:
        run.scan.check(f"result of {result.generation_id}", result.result.model_dump_json())
    return len(rows)


async def _erase(run: Carriers, pool: asyncpg.Pool) -> None:
    """Redact every message of some Threads, delete the others (both facade operations)."""
    for role, thread_id in run.threads:
        handle = crux.thread(id=thread_id, storage=pool)
        if role in REDACTED:
            snapshot = await handle.read()
            ids = [entry.id for entry in snapshot.entries if entry.kind == "message"]
            assert ids, role
            await handle.redact([*ids, *run.unselected.get(thread_id, ())])
        else:
            await handle.delete()


def _dev_server_lines(temporal_log: Path | None, offset: int) -> bytes:
    if temporal_log is None or not temporal_log.exists():
        return b""
    with temporal_log.open("rb") as log:
        log.seek(offset)
        return log.read()


async def test_a_canary_reaches_no_history_log_receipt_error_or_erased_row(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    temporal_log: Path | None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    canary = f"cnry{uuid.uuid4().hex}"
    scan = LeakScan(canary)
    since = datetime.now(UTC) - timedelta(seconds=1)
    log_offset = temporal_log.stat().st_size if temporal_log and temporal_log.exists() else 0

    def answer(request: RecordedRequest) -> TextReply:
        del request
        return TextReply(text=f"Summary: the code word was {canary}.")

    records = RecordingHandler()
    root = logging.getLogger()
    configure_logging(log_format="json", level="debug")
    root.addHandler(records)
    try:
        async with (
            LoopbackOpenAIServer(responder=answer) as openai,
            LoopbackAnthropicServer(responder=answer) as anthropic,
        ):
            settings = settings_for(
                database_url, openai_base_url=openai.base_url, anthropic_base_url=anthropic.base_url
            )
            async with new_worker(
                client,
                pool,
                settings,
                default_model=MODEL,
                tools=canary_tools(canary),
                hooks=[canary_hook(canary)],
            ) as worker:
                run = Carriers(client, pool, worker, canary, scan, since)
                for _round in range(ROUNDS):
                    await _run_carriers(run, pool, openai, anthropic)
                    await _run_failures(run, openai, anthropic)
                workflow_ids = await workflows_since(client, worker.task_queue, since)
                await wait_closed(client, workflow_ids)
                workflow_ids = await workflows_since(client, worker.task_queue, since)
                for workflow_id in workflow_ids:
                    await check_workflow(scan, client, workflow_id)
                receipts = await _check_receipts(run, pool)
                # Control: an id that legitimately travels is found by the same scan, so
                # the scan looks where it says (payloads decoded, search attributes).
                approval = next(t for role, t in run.threads if role == "approval")
                control = LeakScan(approval)
                await check_workflow(control, client, workflow_id_for("canary-approval", approval))
                task_queue = worker.task_queue
        captured = capfd.readouterr()
    finally:
        root.removeHandler(records)
        root.setLevel(logging.WARNING)

    # The canary really went where the test says: the model saw it, PostgreSQL holds it.
    assert any(canary.encode() in request.raw_body for request in openai.requests)
    assert any(canary.encode() in request.raw_body for request in anthropic.requests)
    before = dump_hits(scan, database_url)
    assert set(before) <= TEXT_TABLES, sorted(before)
    assert {"public.crux_thread_messages", "public.crux_derived_artifacts"} <= set(before)

    scan.check("worker stdout", captured.out)
    scan.check("worker stderr", captured.err)
    for number, line in enumerate(records.lines):
        scan.check(f"log record {number}", line)
    assert any("thread.turn.committed" in line for line in records.lines)
    scan.check("dev server log", _dev_server_lines(temporal_log, log_offset))

    assert any(f.startswith("history of") and "payload" in f for f in control.findings)
    assert any(f.startswith("describe of") for f in control.findings)
    control.check("worker log records", "\n".join(records.lines))
    assert control.findings[-1] == "worker log records"
    if temporal_log is not None:
        # The dev server's log names the task queues it serves.
        queue = LeakScan(task_queue)
        queue.check("dev server log", _dev_server_lines(temporal_log, log_offset))
        assert queue.findings == ["dev server log"]

    await _erase(run, pool)
    after = dump_hits(scan, database_url)
    assert after == {}, sorted(after)

    print(
        f"canary: {len(run.results)} committed and {run.errors} failed generations or calls, "
        f"{len(workflow_ids)} workflows, {receipts} receipts, {len(records.lines)} log records, "
        f"{scan.scanned} places searched, rows holding it before erasure {before}, after "
        f"{after}, hits {len(scan.findings)}"
    )
    assert len(workflow_ids) >= 20 * ROUNDS
    assert receipts >= 20 * ROUNDS
    assert run.errors == 15 * ROUNDS
    assert scan.findings == [], "\n".join(scan.findings)


async def test_a_refused_message_or_edit_has_no_traceback_quoting_it(pool: asyncpg.Pool) -> None:
    canary = f"cnry{uuid.uuid4().hex}"
    conversation = crux.thread(id=f"canary-refused:{uuid.uuid4().hex[:8]}", storage=pool)
    # An undeclared field of a part: pydantic's own error would quote its value.
    malformed = [{"kind": "text", "text": "x", "note": canary}]
    with pytest.raises(crux.ThreadError) as appended:
        await conversation.append({"role": "user", "content": malformed})
    commit = await conversation.append({"role": "user", "content": "Edit me"})
    with pytest.raises(crux.ThreadError) as edited:
        await conversation.edit(commit.message_ids[0], content=malformed)  # pyright: ignore[reportArgumentType]
    for error in (appended.value, edited.value):
        assert error.code == "invalid_message"
        shown = "".join(traceback.format_exception(error))
        assert "invalid_message" in shown
        assert canary not in shown


@pytest.mark.parametrize("log_format", ["console", "json"])
def test_a_logged_traceback_shows_no_local_variables(
    log_format: str, capfd: pytest.CaptureFixture[str]
) -> None:
    canary = f"cnry{uuid.uuid4().hex}"

    def fail(text: str) -> None:
        raise ValueError(f"failed on {len(text)} characters")

    configure_logging(log_format=log_format, level="info")
    try:
        try:
            fail(canary)
        except ValueError:
            logging.getLogger("tests.canary").warning("step failed", exc_info=True)
        output = capfd.readouterr().err
    finally:
        logging.getLogger().setLevel(logging.WARNING)
    assert "step failed" in output
    assert "ValueError" in output
    assert canary not in output
