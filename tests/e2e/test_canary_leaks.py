"""One canary string through every content carrier, then searched for everywhere it must not be.

The canary is placed in Thread messages (appended, with metadata, and edited), the prompt input and
system text, context contributors (system and message placement, authored alternatives), a turn
masked by input safety, a turn written to the response cache and then served from it (an exact
and a semantic hit), a blocked turn, a reply refused by terminal safety, replies violating a
constraint, tool arguments and results (a valid call, invalid arguments, a tool that raises with
it, a tool name the model invented, a call waiting for approval), call-site messages that shadow a
Thread, a parallel run's shared context, structured output (rejected and accepted replies),
summaries (the summary model answers with it; one summary call is refused with it), provider error
bodies (4xx and 5xx of both wire formats, a malformed body, a stream cut by an error event), text
PostgreSQL cannot store (from the caller, the provider and a tool) and a step hook that raises
with it. Plain, tool-round, approval, streaming, summarised, parallel and failing generations
run on one worker in the test's process; a second test runs the scenarios that need no
test-registered tool or hook on a `worker.py` process (`CRUX_LOG_FORMAT=json`, debug level),
whose whole output is searched.

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

import json
import logging
import os
import traceback
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.logs import configure_logging
from crux.models import workflow_id_for
from providers.loopback import LoopbackAnthropicServer, LoopbackOpenAIServer, TextReply
from tests.canary_carriers import MODEL, Carriers, canary_hook, canary_tools
from tests.canary_runs import run_failures, run_generations
from tests.chaos import WorkerFleet
from tests.helpers import new_worker, settings_for, worker_polls
from tests.leaks import (
    LeakScan,
    RecordingHandler,
    check_workflow,
    dump_hits,
    wait_closed,
    workflows_since,
)

pytestmark = pytest.mark.durability

# Tables that hold caller text until it is erased: canonical messages, staged turns and
# streamed deltas, derived artifacts (summaries) and response-cache entries (a committed
# reply, kept for reuse). Nothing else may ever hold the canary.
TEXT_TABLES = {
    "public.crux_thread_messages",
    "public.crux_generation_staging",
    "public.crux_derived_artifacts",
    "public.crux_cache_entries",
}
# Threads whose every message is redacted; the others are deleted. A call whose messages
# shadowed its Thread keeps its reply beside the Thread, not in it: only deleting the Thread
# erases that reply, so the shadowed Thread is deleted.
# The first cached turn's Thread is redacted, the second's deleted: each takes its cache
# entry with it (the Threads served from an entry are deleted).
REDACTED = ("plain", "summary", "output", "approval", "cached")
ROUNDS = 5 if os.environ.get("CRUX_SOAK") == "1" else 1
"""Every scenario runs once in CI and five times under `make soak`."""


@dataclass
class Canary:
    """One test's canary, its scan, and where the run started (workflows, dev-server log)."""

    value: str
    scan: LeakScan
    since: datetime
    log_offset: int

    @classmethod
    def new(cls, temporal_log: Path | None) -> Canary:
        """A fresh canary; the dev-server log is read from its current end."""
        value = f"cnry{uuid.uuid4().hex}"
        offset = temporal_log.stat().st_size if temporal_log and temporal_log.exists() else 0
        since = datetime.now(UTC) - timedelta(seconds=1)
        return cls(value=value, scan=LeakScan(value), since=since, log_offset=offset)


@asynccontextmanager
async def _providers(
    canary: str,
) -> AsyncIterator[tuple[LoopbackOpenAIServer, LoopbackAnthropicServer]]:
    """Both wire formats; an unscripted call (a summary, say) is answered with the canary."""

    def answer(request: object) -> TextReply:
        del request
        return TextReply(text=f"Summary: the code word was {canary}.")

    async with (
        LoopbackOpenAIServer(responder=answer) as openai,
        LoopbackAnthropicServer(responder=answer) as anthropic,
    ):
        yield openai, anthropic


async def _check_temporal(run: Carriers) -> list[str]:
    """Every workflow of the run, once none is running any more."""
    workflow_ids = await workflows_since(run.client, run.task_queue, run.since)
    await wait_closed(run.client, workflow_ids)
    workflow_ids = await workflows_since(run.client, run.task_queue, run.since)
    for workflow_id in workflow_ids:
        await check_workflow(run.scan, run.client, workflow_id)
    return workflow_ids


async def _check_erasure(run: Carriers, database_url: str) -> dict[str, int]:
    """Before erasure only text tables hold it; after redaction and deletion, nothing does."""
    before = dump_hits(run.scan, database_url)
    assert set(before) <= TEXT_TABLES, sorted(before)
    assert "public.crux_thread_messages" in before
    assert "public.crux_derived_artifacts" in before
    assert "public.crux_cache_entries" in before
    await _erase(run, run.pool)
    after = dump_hits(run.scan, database_url)
    assert after == {}, sorted(after)
    return before


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
    canary = Canary.new(temporal_log)
    scan = canary.scan
    records = RecordingHandler()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(log_format="json", level="debug")
    root.addHandler(records)
    try:
        async with _providers(canary.value) as (openai, anthropic):
            settings = settings_for(
                database_url, openai_base_url=openai.base_url, anthropic_base_url=anthropic.base_url
            )
            async with new_worker(
                client,
                pool,
                settings,
                default_model=MODEL,
                tools=canary_tools(canary.value),
                hooks=[canary_hook(canary.value)],
            ) as worker:
                run = Carriers(
                    client,
                    pool,
                    worker.runtime,
                    worker.task_queue,
                    canary.value,
                    scan,
                    canary.since,
                )
                for _round in range(ROUNDS):
                    await run_generations(run, pool, openai, anthropic)
                    await run_failures(run, openai, anthropic)
                workflow_ids = await _check_temporal(run)
                receipts = await _check_receipts(run, pool)
                # Control: an id that legitimately travels is found by the same scan, so
                # the scan looks where it says (payloads decoded, search attributes).
                approval = next(t for role, t in run.threads if role == "approval")
                control = LeakScan(approval)
                await check_workflow(control, client, workflow_id_for("canary-approval", approval))
        captured = capfd.readouterr()
    finally:
        # The handlers write to this test's captured stderr: put the previous ones back.
        root.handlers[:], level = saved
        root.setLevel(level)

    # The canary really went where the test says: the models saw it.
    assert any(canary.value.encode() in request.raw_body for request in openai.requests)
    assert any(canary.value.encode() in request.raw_body for request in anthropic.requests)
    scan.check("worker stdout", captured.out)
    scan.check("worker stderr", captured.err)
    for number, line in enumerate(records.lines):
        scan.check(f"log record {number}", line)
    assert any("thread.turn.committed" in line for line in records.lines)
    dev_server = _dev_server_lines(temporal_log, canary.log_offset)
    scan.check("dev server log", dev_server)

    assert any(f.startswith("history of") and "payload" in f for f in control.findings)
    assert any(f.startswith("describe of") for f in control.findings)
    control.check("worker log records", "\n".join(records.lines))
    assert control.findings[-1] == "worker log records"
    if temporal_log is not None:
        # The dev server's log names the task queues it serves.
        queue = LeakScan(run.task_queue)
        queue.check("dev server log", dev_server)
        assert queue.findings == ["dev server log"]

    before = await _check_erasure(run, database_url)
    print(
        f"canary: {len(run.results)} committed and {run.errors} failed generations or calls, "
        f"{len(workflow_ids)} workflows, {receipts} receipts, {len(records.lines)} log records, "
        f"{scan.scanned} places searched, rows holding it before erasure {before}, after "
        f"erasure none, hits {len(scan.findings)}"
    )
    assert len(workflow_ids) >= 20 * ROUNDS
    assert receipts >= 20 * ROUNDS
    assert run.errors == 21 * ROUNDS
    assert scan.findings == [], "\n".join(scan.findings)


async def test_a_worker_process_writes_no_canary_anywhere(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    temporal_log: Path | None,
    tmp_path: Path,
) -> None:
    canary = Canary.new(temporal_log)
    task_queue = f"crux-canary-{uuid.uuid4().hex[:8]}"
    async with _providers(canary.value) as (openai, anthropic):
        fleet = WorkerFleet(
            env={
                "TEMPORAL_ADDRESS": client.service_client.config.target_host,
                "CRUX_DATABASE_URL": database_url,
                "CRUX_TASK_QUEUE": task_queue,
                "CRUX_MODEL": MODEL,
                "OPENAI_BASE_URL": openai.base_url,
                "OPENAI_API_KEY": "sk-test-not-a-secret",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "ANTHROPIC_API_KEY": "sk-ant-test-not-a-secret",
                "CRUX_LOG_FORMAT": "json",
                "CRUX_LOG_LEVEL": "debug",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            },
            size=1,
            log_dir=tmp_path,
        )
        fleet.start()
        try:
            await worker_polls(client, task_queue)
            runtime = crux.Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            run = Carriers(
                client,
                pool,
                runtime,
                task_queue,
                canary.value,
                canary.scan,
                canary.since,
                registered=False,
            )
            await run_generations(run, pool, openai, anthropic)
            await run_failures(run, openai, anthropic)
            workflow_ids = await _check_temporal(run)
            await _check_receipts(run, pool)
        finally:
            fleet.stop()

    output = b"".join(path.read_bytes() for path in sorted(tmp_path.glob("worker-*.log")))
    assert b"thread.turn.committed" in output
    assert task_queue.encode() in output
    canary.scan.check("worker process output", output)
    canary.scan.check("dev server log", _dev_server_lines(temporal_log, canary.log_offset))
    await _check_erasure(run, database_url)
    assert len(workflow_ids) >= 15
    assert canary.scan.findings == [], "\n".join(canary.scan.findings)


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

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(log_format=log_format, level="info")
    try:
        try:
            fail(canary)
        except ValueError:
            logging.getLogger("tests.canary").warning("step failed", exc_info=True)
        output = capfd.readouterr().err
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    assert "step failed" in output
    assert "ValueError" in output
    assert canary not in output


async def test_an_ad_hoc_reply_is_gone_from_postgresql_once_its_caller_read_it(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Ad hoc, streamed, and shadowing a Thread: once read, no row holds the text (pg_dump).

    A run started by a plain client keeps its reply until the caller erases it by id.
    """
    canary = f"cnry{uuid.uuid4().hex}"
    scan = LeakScan(canary)
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        runtime = worker.runtime
        generated = await runtime.generate(f"Say {canary}", generation_id="adhoc-1")
        assert canary in generated.text
        assert dump_hits(scan, database_url) == {}

        streamed = [
            update async for update in runtime.stream(f"Stream {canary}", generation_id="adhoc-2")
        ]
        assert isinstance(streamed[-1], crux.StreamCommitted)
        assert canary in streamed[-1].generation.text
        assert dump_hits(scan, database_url) == {}

        conversation = crux.thread(id=f"shadowed:{uuid.uuid4().hex[:6]}", storage=pool)
        shadowed = await runtime.generate(
            "Answer",
            thread=conversation,
            messages=[{"role": "user", "content": f"Echo {canary}"}],
            generation_id="adhoc-3",
        )
        assert shadowed.thread_commit is None
        assert dump_hits(scan, database_url) == {}

        # A plain client's run: its outcome holds ids only; the reply waits for its reader.
        await client.execute_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": "plain-1", "input": f"Plain {canary}"},
            id=workflow_id_for("plain-1", None),
            task_queue=worker.task_queue,
        )
        assert set(dump_hits(scan, database_url)) == {"public.crux_generation_staging"}
        assert await runtime.erase_generation("plain-1")
        assert dump_hits(scan, database_url) == {}
    print(f"ad hoc erasure: {scan.scanned} dumps searched, hits {len(scan.findings)}")
