"""With the encryption payload codec, an inline input and a reply asked for stay ciphertext.

A plain Temporal client (no facade, no staging) starts generations with inline input on a
worker whose payloads are encrypted; every payload of their histories is
`binary/encrypted`, the canary is found nowhere in them, and the outcome carries the reply
(`include_reply`). A worker without a codec refuses `include_reply`, typed.
"""

from __future__ import annotations

import base64
import json
import uuid

import asyncpg
import pytest
from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from contracts.generation import GenerationOutcome
from crux.codec import ENCODING, EncryptionCodec, parse_keys, with_codec
from tests.helpers import new_worker, settings_for
from tests.leaks import LeakScan, payloads
from vocabulary.ids import workflow_id_for


def _payloads_outside_search_attributes(node: ProtoMessage) -> list[Payload]:
    found: list[Payload] = []
    for descriptor, value in node.ListFields():
        if descriptor.name == "search_attributes":
            continue
        if isinstance(value, Payload):
            found.append(value)
        elif isinstance(value, ProtoMessage):
            found += _payloads_outside_search_attributes(value)
        elif descriptor.message_type is not None:
            items = value.values() if hasattr(value, "values") else value
            for item in items:
                if isinstance(item, Payload):
                    found.append(item)
                elif isinstance(item, ProtoMessage):
                    found += _payloads_outside_search_attributes(item)
    return found


def _without_marker_data(event: HistoryEvent) -> HistoryEvent:
    copy = HistoryEvent()
    copy.CopyFrom(event)
    if copy.HasField("marker_recorded_event_attributes"):
        details = copy.marker_recorded_event_attributes.details
        assert "result" in details
        del details["data"]
    return copy


def _codec_client(client: Client) -> tuple[Client, EncryptionCodec]:
    keys = parse_keys(f"test-1:{base64.b64encode(uuid.uuid4().bytes * 2).decode()}")
    codec = EncryptionCodec(keys)
    config = client.config()
    config["data_converter"] = with_codec(client.data_converter, codec)
    return Client(**config), codec


async def test_inline_input_and_the_reply_stay_ciphertext_in_history(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    canary = f"cnry{uuid.uuid4().hex}"
    encrypted, _ = _codec_client(client)
    thread_id = f"enc:{uuid.uuid4().hex[:6]}"
    async with new_worker(encrypted, pool, settings_for(database_url)) as worker:
        outcomes: list[GenerationOutcome] = []
        for generation_id, thread in (("g1", thread_id), ("g1", thread_id), ("adhoc", None)):
            raw = await encrypted.execute_workflow(
                "ManagedGenerationWorkflow",
                {
                    "generation_id": generation_id,
                    "thread_id": thread,
                    "input": f"Say {canary}",
                    "include_reply": True,
                },
                id=workflow_id_for(generation_id, thread),
                task_queue=worker.task_queue,
            )
            outcomes.append(GenerationOutcome.model_validate(raw))
        # Queries need the worker: the checks run before it stops.
        first, replay, adhoc = outcomes
        assert first.reply is not None and canary in first.reply
        assert replay.replayed and replay.reply == first.reply
        assert adhoc.reply is not None and canary in adhoc.reply and adhoc.thread_id is None
        # Delivered in the outcome, the ad-hoc reply is kept no longer.
        finals = "SELECT count(*) FROM crux_generation_staging WHERE kind = 'final'"
        assert await pool.fetchval(finals) == 0
        scan = LeakScan(canary)
        for workflow_id in (workflow_id_for("g1", thread_id), workflow_id_for("adhoc", None)):
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            found = [p for event in history.events for p in payloads(event)]
            assert found, workflow_id
            # Search attributes are indexed by the server, so no codec touches them (they hold
            # ids and stage names only), and a local activity's marker keeps the SDK's own
            # bookkeeping (sequence number, activity type, times) beside its encrypted result.
            # Every other payload is ciphertext.
            clear = [
                EventType.Name(event.event_type)
                for event in history.events
                for p in _payloads_outside_search_attributes(_without_marker_data(event))
                if p.metadata.get("encoding") != ENCODING
            ]
            assert clear == [], clear
            # Without the codec, nothing of it can be read: history (raw and as JSON), the
            # description with its summary and details, every query answer.
            scan.check(f"history of {workflow_id}", history.to_json())
            for event in history.events:
                scan.check(f"event {event.event_id} of {workflow_id}", event.SerializeToString())
            handle = client.get_workflow_handle(workflow_id)
            described = await handle.describe()
            scan.check(f"describe of {workflow_id}", described.raw_description.SerializeToString())
            for query in ("describe", "get_stage"):
                answer = await encrypted.get_workflow_handle(workflow_id).query(query)
                scan.check(f"query {query} of {workflow_id}", json.dumps(answer))

    assert scan.findings == [], scan.findings
    assert scan.scanned > 20


async def test_a_worker_without_a_codec_refuses_include_reply_before_any_call(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"clear:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(
                "ManagedGenerationWorkflow",
                {
                    "generation_id": "g1",
                    "thread_id": thread_id,
                    "input": "hi",
                    "include_reply": True,
                },
                id=workflow_id_for("g1", thread_id),
                task_queue=worker.task_queue,
            )
    cause: BaseException | None = failed.value.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert isinstance(cause, ApplicationError) and cause.type == "ConfigurationError"
    assert "CRUX_CODEC_KEYS" in cause.message
    # Nothing was staged or committed.
    assert await pool.fetchval("SELECT count(*) FROM crux_generation_staging") == 0
    assert await pool.fetchval("SELECT count(*) FROM crux_thread_messages") == 0
