"""Generations over HTTP: run and await, stream and resume, stage for a plain Temporal
client and read its reply, erase an ad-hoc reply."""

from __future__ import annotations

import json

import asyncpg
import httpx
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from tests.helpers import closed_run
from tests.http.api import client
from tests.http.conftest import Api
from tests.leaks import LeakScan


async def _events(response: httpx.Response) -> list[tuple[str | None, str, str]]:
    """(id, event, data) of each server-sent event; comments skipped."""
    events: list[tuple[str | None, str, str]] = []
    current: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if current:
                events.append((current.get("id"), current["event"], current["data"]))
            current = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            current[name] = value
    return events


async def test_a_generation_runs_once_and_answers_with_its_reply(api: Api) -> None:
    async with client(api.url, api.credentials.headers("acme")) as http:
        body = {"thread_id": "chat", "generation_id": "g1", "message": "What is the time?"}
        first = await http.post("/v1/generations", json=body)
        assert first.status_code == 200, first.text
        reply = first.json()
        assert reply["generation_id"] == "g1" and reply["thread_id"] == "chat"
        assert "What is the time?" in reply["text"]
        assert reply["result"]["thread_commit"]["message_ids"] == [
            "gen:g1:user",
            "gen:g1:assistant",
        ]
        again = (await http.post("/v1/generations", json=body)).json()
        assert again["result"]["replayed"] is True and again["text"] == reply["text"]
        conflict = await http.post("/v1/generations", json={**body, "message": "Other"})
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "identity_conflict"
        thread = (await http.get("/v1/threads/chat")).json()
        assert [e["id"] for e in thread["entries"]] == ["gen:g1:user", "gen:g1:assistant"]
        request_id = reply["result"]["steps"][0]["request"]["id"]
        receipt = await http.get(f"/v1/receipts/{request_id}")
        assert receipt.status_code == 200 and receipt.json()["id"] == request_id
        inspection = await http.get(f"/v1/receipts/{request_id}/inspection")
        assert inspection.status_code == 200
        assert (await http.get("/v1/receipts/request_unknown")).status_code == 404


async def test_an_ad_hoc_reply_is_erased_once_returned(api: Api, pool: asyncpg.Pool) -> None:
    async with client(api.url, api.credentials.headers("acme")) as http:
        ran = await http.post(
            "/v1/generations",
            json={
                "generation_id": "once",
                "message": "Summarise this",
                "messages": [{"role": "user", "content": "Earlier words"}],
            },
        )
        assert ran.status_code == 200, ran.text
        assert ran.json()["thread_id"] is None and ran.json()["generation_id"] == "once"
        assert "Summarise this" in ran.json()["text"]
        read = await http.get("/v1/generations/once")
        assert read.status_code == 200
        assert read.json()["text"] is None and read.json()["result"]["generation_id"] == "once"
    assert (
        await pool.fetchval("SELECT count(*) FROM crux_generation_staging WHERE kind = 'final'")
        == 0
    )


async def test_a_stream_sends_deltas_then_the_reply_and_resumes_after_an_id(api: Api) -> None:
    body = {"thread_id": "streamed", "generation_id": "s1", "message": "Stream this please"}
    async with client(api.url, api.credentials.headers("acme")) as http:
        async with http.stream("POST", "/v1/generations/stream", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = await _events(response)
        deltas = [(i, json.loads(d)["text"]) for i, e, d in events if e == "delta"]
        assert len(deltas) >= 2 and events[-1][1] == "committed"
        committed = json.loads(events[-1][2])
        assert "".join(text for _, text in deltas) == committed["text"]
        assert committed["thread_id"] == "streamed"
        # A client that saw the first delta resumes: the run is attached to, not repeated.
        first_id = deltas[0][0]
        headers = {"Last-Event-ID": first_id or ""}
        async with http.stream(
            "POST", "/v1/generations/stream", json=body, headers=headers
        ) as resumed:
            again = await _events(resumed)
        assert again[-1][1] == "committed"
        assert json.loads(again[-1][2])["result"]["replayed"] is True
        assert all(i is None or i > (first_id or "") for i, _, _ in again)
        thread = (await http.get("/v1/threads/streamed")).json()
        assert len(thread["entries"]) == 2
        refused = await http.post("/v1/generations/stream", json={**body, "message": "other"})
        assert refused.status_code == 409


async def test_a_plain_temporal_client_starts_a_staged_turn_and_reads_the_reply(
    api: Api, client: Client, pool: asyncpg.Pool
) -> None:
    marker = "staged-text-marker-7f3a"
    async with client_for(api, "globex") as http:
        staged = await http.post(
            "/v1/staged-inputs",
            json={"thread_id": "orders", "generation_id": "p1", "message": f"Where is {marker}?"},
        )
        assert staged.status_code == 200, staged.text
        plan = staged.json()
        assert plan["start"]["thread_id"] == "t/globex/orders"
        assert plan["workflow_id"] == "crux/gen/t%2Fglobex%2Forders/p1"
        handles = [
            await client.start_workflow(
                "ManagedGenerationWorkflow",
                {**plan["start"], "model": "offline:echo"},
                id=plan["workflow_id"],
                task_queue=api.worker.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            for _ in range(2)  # a retried start attaches to the same run
        ]
        assert handles[0].result_run_id == handles[1].result_run_id
        outcome = await handles[1].result()
        assert outcome["thread_id"] == "t/globex/orders"
        read = await http.get("/v1/generations/p1", params={"thread_id": "orders"})
        assert read.status_code == 200 and marker in read.json()["text"]
        again = await http.post(
            "/v1/staged-inputs",
            json={"thread_id": "orders", "generation_id": "p1", "message": f"Where is {marker}?"},
        )
        assert again.json()["replayed"] is True
        other = await http.post(
            "/v1/staged-inputs",
            json={"thread_id": "orders", "generation_id": "p1", "message": "Something else"},
        )
        assert other.status_code == 409
        # Ad hoc: the reply is kept until read, then erased by DELETE.
        adhoc = (
            await http.post("/v1/staged-inputs", json={"generation_id": "p2", "message": marker})
        ).json()
        assert adhoc["start"]["generation_id"] == "t/globex/p2"
        await client.execute_workflow(
            "ManagedGenerationWorkflow",
            adhoc["start"],
            id=adhoc["workflow_id"],
            task_queue=api.worker.task_queue,
        )
        assert marker in (await http.get("/v1/generations/p2")).json()["text"]
        assert (await http.delete("/v1/generations/p2")).status_code == 204
        assert (await http.delete("/v1/generations/p2")).status_code == 204
        assert (await http.get("/v1/generations/p2")).json()["text"] is None
        assert (await http.delete("/v1/generations/never")).status_code == 404
    scan = LeakScan(marker)
    for workflow_id in (plan["workflow_id"], adhoc["workflow_id"]):
        history = await (await closed_run(client, workflow_id)).fetch_history()
        scan.check(
            workflow_id, history.to_json(), b"".join(e.SerializeToString() for e in history.events)
        )
    assert scan.findings == [] and scan.scanned == 4


def client_for(api: Api, tenant: str) -> httpx.AsyncClient:
    return client(api.url, api.credentials.headers(tenant))
