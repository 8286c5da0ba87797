"""The TypeScript client suite (tests/ts), run against a real stack by this test.

A worker for plain clients (with a `pay` tool that needs approval, answered by a loopback
OpenAI server), a worker whose client encrypts payloads, and the HTTP API on loopback serve
`node --test` over the compiled suite, which uses the real `@temporalio/client` pinned in
tests/ts/package-lock.json (installed here with `npm ci` when the lock changed). Afterwards
every Thread holds each of its turns exactly once, and the canary the suite wrote into every
message is found in no history, description, query answer or log line.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shutil
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.codec import EncryptionCodec, parse_keys, with_codec
from crux.logs import configure_logging
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from tests.helpers import new_worker, settings_for
from tests.http.api import Credentials, serving
from tests.leaks import LeakScan, RecordingHandler, check_workflow, wait_closed
from tests.ts import node
from vocabulary.ids import user_message_id

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

SUITE = Path(__file__).parent
VECTORS = SUITE.parent.parent / "schemas" / "codec.test-vectors.json"


def _payment_tool() -> crux.Tool:
    schema = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
    return crux.tool("pay", lambda _arguments: "paid", parameters=schema, requires_approval=True)


def _encrypted(client: Client, keys: str) -> Client:
    config = client.config()
    config["data_converter"] = with_codec(client.data_converter, EncryptionCodec(parse_keys(keys)))
    return Client(**config)


async def _turns_once(pool: asyncpg.Pool, made: list[dict[str, Any]]) -> None:
    """Each Thread holds exactly the user turns of its committed generations, once each."""
    threads: dict[str, set[str]] = {}
    for entry in made:
        if entry["threadId"] is not None:
            users = threads.setdefault(entry["threadId"], set())
            if entry["commits"]:
                users.add(user_message_id(entry["generationId"]))
    for thread_id, expected in threads.items():
        rows = await pool.fetch(
            "SELECT message_id, role FROM crux_thread_messages WHERE thread_id = $1", thread_id
        )
        users = [row["message_id"] for row in rows if row["role"] == "user"]
        assert sorted(users) == sorted(expected), thread_id
        assistants = sum(row["role"] == "assistant" for row in rows)
        assert assistants >= len(expected), thread_id


async def test_the_typescript_client_suite(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    tmp_path: Path,
) -> None:
    await node.installed(SUITE)
    shutil.rmtree(SUITE / "build", ignore_errors=True)  # no stale test of a removed source
    await node.run(SUITE, "npx", "--no-install", "tsc", "-p", ".")
    canary = f"cnry{uuid.uuid4().hex}"
    keys = f"ts-{uuid.uuid4().hex[:6]}:{base64.b64encode(secrets.token_bytes(32)).decode()}"
    # The approval runs, in the suite's order: a call to approve, then one to deny.
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": "acct"}, id="call_a1")),
        TextReply(text="Paid."),
        tool_call_reply(ScriptedToolCall(name="pay", arguments={"to": "acct"}, id="call_d1")),
        TextReply(text="Not paid."),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    sealed = _encrypted(client, keys)
    credentials = Credentials()
    report = tmp_path / "made.jsonl"
    records = RecordingHandler()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(log_format="json", level="info")
    root.addHandler(records)
    try:
        async with (
            new_worker(client, pool, settings, tools=[_payment_tool()]) as worker,
            new_worker(sealed, pool, settings) as encrypted,
            serving(
                worker.runtime, credentials, codec=EncryptionCodec(parse_keys(keys))
            ) as api_url,
        ):
            env = {
                **os.environ,
                "TEMPORAL_ADDRESS": client.service_client.config.target_host,
                "TEMPORAL_NAMESPACE": client.namespace,
                "CRUX_TASK_QUEUE": worker.task_queue,
                "CRUX_ENCRYPTED_TASK_QUEUE": encrypted.task_queue,
                "CRUX_API_URL": api_url,
                "CRUX_API_KEY": credentials.keys["acme"],
                "CRUX_CODEC_KEYS": keys,
                "CRUX_CANARY": canary,
                "CRUX_TS_REPORT": str(report),
                "CRUX_CODEC_VECTORS": str(VECTORS),
            }
            tests = sorted(str(p.relative_to(SUITE)) for p in (SUITE / "build").glob("*.test.js"))
            assert len(tests) >= 2
            output = await node.run(
                SUITE, "node", "--test", "--test-concurrency=1", *tests, env=env
            )
            assert "# fail 0" in output and "# pass 0" not in output, output[-4000:]
            made = [json.loads(line) for line in report.read_text().splitlines()]
            assert len(made) >= 6
            workflow_ids = sorted({entry["workflowId"] for entry in made})
            await wait_closed(client, workflow_ids)
            # While the workers run (the queries need them): nothing of the text anywhere.
            scan = LeakScan(canary)
            for workflow_id in workflow_ids:
                described = await client.get_workflow_handle(workflow_id).describe()
                # The encrypted runs' summaries and query answers need the codec to be read
                # (their payloads are still scanned as stored: ciphertext).
                reader = sealed if described.task_queue == encrypted.task_queue else client
                await check_workflow(scan, reader, workflow_id)
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    scan.check("logs", "\n".join(records.lines))
    assert scan.findings == [], scan.findings
    assert scan.scanned > 100
    await _turns_once(pool, made)
