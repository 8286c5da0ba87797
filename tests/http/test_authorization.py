"""Every endpoint x no credential, a garbage one, an expired or foreign token, another tenant.

Tenant `acme` owns a Thread, a Thread generation with its receipt, and an ad-hoc generation,
all marked with a canary. Every other caller gets 401 (no valid credential) or 404 (not
theirs: the same body as a missing resource); endpoints that create something create it in
the caller's own scope and leave acme's untouched. No response to another caller, and no
log line, holds anything of acme's.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from crux.logs import configure_logging
from tests.http.api import AUDIENCE, client
from tests.http.conftest import Api
from tests.leaks import LeakScan, RecordingHandler


@dataclass(frozen=True)
class Call:
    """One operation of the API, addressing acme's resources."""

    method: str
    template: str
    path: str
    body: dict[str, Any] | None = None
    creates: bool = False  # another tenant's call creates its own resource: 2xx expected
    public: bool = False  # needs no credential (health probes)
    shared: bool = False  # tenant-agnostic (the codec server)


def _calls(thread: str, request_id: str, canary: str) -> list[Call]:
    payload = {"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "IngiCg=="}
    return [
        Call("GET", "/healthz", "/healthz", public=True),
        Call("GET", "/readyz", "/readyz", public=True),
        Call("GET", "/v1/threads/{thread_id}", f"/v1/threads/{thread}"),
        Call("GET", "/v1/generations/{generation_id}", f"/v1/generations/g1?thread_id={thread}"),
        Call("GET", "/v1/receipts/{request_id}", f"/v1/receipts/{request_id}"),
        Call(
            "GET", "/v1/receipts/{request_id}/inspection", f"/v1/receipts/{request_id}/inspection"
        ),
        Call(
            "POST",
            "/v1/threads/{thread_id}/messages",
            f"/v1/threads/{thread}/messages",
            {"messages": [{"id": f"x-{uuid.uuid4().hex[:6]}", "role": "user", "content": "hi"}]},
            creates=True,
        ),
        Call(
            "POST",
            "/v1/staged-inputs",
            "/v1/staged-inputs",
            {"thread_id": thread, "generation_id": f"s-{uuid.uuid4().hex[:6]}", "message": "hi"},
            creates=True,
        ),
        Call(
            "POST",
            "/v1/generations",
            "/v1/generations",
            {"thread_id": thread, "generation_id": f"n-{uuid.uuid4().hex[:6]}", "message": "hi"},
            creates=True,
        ),
        Call(
            "POST",
            "/v1/generations/stream",
            "/v1/generations/stream",
            {"generation_id": f"n-{uuid.uuid4().hex[:6]}", "message": "hi"},
            creates=True,
        ),
        Call("POST", "/codec/encode", "/codec/encode", {"payloads": [payload]}, shared=True),
        Call("POST", "/codec/decode", "/codec/decode", {"payloads": [payload]}, shared=True),
        Call(
            "POST",
            "/v1/threads/{thread_id}/edit",
            f"/v1/threads/{thread}/edit",
            {"message_id": "u1", "content": "edited", "id": f"e-{uuid.uuid4().hex[:6]}"},
        ),
        Call(
            "POST",
            "/v1/threads/{thread_id}/select",
            f"/v1/threads/{thread}/select",
            {"message_id": "u1"},
        ),
        Call(
            "POST",
            "/v1/threads/{thread_id}/remove",
            f"/v1/threads/{thread}/remove",
            {"message_id": "gen:g1:user"},
        ),
        Call(
            "POST",
            "/v1/threads/{thread_id}/redact",
            f"/v1/threads/{thread}/redact",
            {"ids": ["u1"]},
        ),
        Call("DELETE", "/v1/generations/{generation_id}", "/v1/generations/adhoc1"),
        Call("DELETE", "/v1/threads/{thread_id}", f"/v1/threads/{thread}"),
    ]


async def _send(http: httpx.AsyncClient, call: Call, headers: dict[str, str]) -> httpx.Response:
    return await http.request(call.method, call.path, json=call.body, headers=headers)


async def test_every_endpoint_refuses_strangers_and_hides_another_tenants_resources(
    api: Api,
) -> None:
    canary = f"cnry{uuid.uuid4().hex}"
    thread = f"private-{uuid.uuid4().hex[:8]}"
    credentials = api.credentials
    acme = credentials.headers("acme")
    records = RecordingHandler()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(log_format="json", level="info")
    root.addHandler(records)
    try:
        async with client(api.url) as http:
            setup = await http.post(
                f"/v1/threads/{thread}/messages",
                json={"messages": [{"id": "u1", "role": "user", "content": f"My code {canary}"}]},
                headers=acme,
            )
            assert setup.status_code == 200
            ran = await http.post(
                "/v1/generations",
                json={"thread_id": thread, "generation_id": "g1", "message": f"Repeat {canary}"},
                headers=acme,
            )
            request_id = ran.json()["result"]["steps"][0]["request"]["id"]
            staged = await http.post(
                "/v1/staged-inputs",
                json={"generation_id": "adhoc1", "message": f"Keep {canary}"},
                headers=acme,
            )
            assert staged.status_code == 200
            await api.worker.runtime.client.execute_workflow(
                "ManagedGenerationWorkflow",
                staged.json()["start"],
                id=staged.json()["workflow_id"],
                task_queue=api.worker.task_queue,
            )
            calls = _calls(thread, request_id, canary)
            # Every operation of the OpenAPI document is in the matrix.
            document = (await http.get("/openapi.json")).json()
            operations = {
                (method.upper(), path.replace(":path", ""))
                for path, item in document["paths"].items()
                for method in item
            }
            assert operations == {(c.method, c.template) for c in calls}

            expired = credentials.token("acme", expires_in=-3600)
            strangers = {
                "no credential": {},
                "garbage key": {"Authorization": "Bearer not-a-key"},
                "garbage token": {"Authorization": "Bearer eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"},
                "garbage api key header": {"X-API-Key": "crux_guessed"},
                "basic scheme": {"Authorization": "Basic YWNtZTpwYXNz"},
                "expired token": {"Authorization": f"Bearer {expired}"},
                "other audience": {
                    "Authorization": f"Bearer {credentials.token('acme', audience='other')}"
                },
                "other issuer": {
                    "Authorization": f"Bearer {credentials.token('acme', issuer='https://evil')}"
                },
                "unsigned token": {
                    "Authorization": "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0."
                    "eyJ0ZW5hbnQiOiJhY21lIiwiaXNzIjoiaHR0cHM6Ly9pc3N1ZXIuY3J1eC50ZXN0IiwiYXVkIjoiY3J1eC1hcGkifQ."
                },
            }
            globex = {"Authorization": f"Bearer {credentials.token('globex')}"}
            scan = LeakScan(canary)
            tenant_scan = LeakScan("t/acme/")
            seen: dict[str, int] = {}
            # Calls that create go last: another tenant creating the same ids creates its
            # own resources, which its later calls would then rightly find.
            for call in sorted(calls, key=lambda c: c.creates):
                for name, headers in strangers.items():
                    response = await _send(http, call, headers)
                    # A public endpoint answers without a credential; readiness may say 503
                    # when a dependency is slow on a busy machine, which is its own answer.
                    expected = {200, 503} if call.template == "/readyz" else {200}
                    if not call.public:
                        expected = {401}
                    assert response.status_code in expected, (call.template, name, response.text)
                    if not call.public:
                        assert response.json()["error"]["code"] == "unauthenticated"
                        assert response.headers["www-authenticate"] == "Bearer"
                    scan.check(f"{name} {call.template}", response.content)
                    seen[name] = seen.get(name, 0) + 1
                response = await _send(http, call, globex)
                scan.check(f"globex {call.template}", response.content)
                tenant_scan.check(f"globex {call.template}", response.content)
                if call.public or call.shared or call.creates:
                    assert response.status_code == 200, (call.template, response.text)
                else:
                    assert response.status_code == 404, (call.template, response.text)
                    assert response.json() == {
                        "error": {
                            "type": "NotFound",
                            "code": "not_found",
                            "message": "no such resource",
                            "retryable": False,
                        }
                    }
            # Acme's resources are as acme left them, and acme still reaches each of them.
            snapshot = (await http.get(f"/v1/threads/{thread}", headers=acme)).json()
            assert [e["id"] for e in snapshot["entries"]] == [
                "u1",
                "gen:g1:user",
                "gen:g1:assistant",
            ]
            assert canary in snapshot["entries"][0]["content"]
            for call in calls:
                response = await _send(http, call, acme)
                assert response.status_code in (200, 204), (call.template, response.text)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    assert scan.findings == [] and tenant_scan.findings == [], (scan.findings, tenant_scan.findings)
    assert set(seen.values()) == {len(calls)}
    for number, line in enumerate(records.lines):
        scan.check(f"log record {number}", line)
    assert scan.findings == [], scan.findings
    assert any("http.request" in line and "globex" in line for line in records.lines)


@pytest.mark.parametrize("audience", [AUDIENCE])
async def test_a_token_of_another_tenant_claim_shape_is_refused(api: Api, audience: str) -> None:
    import jwt as pyjwt

    for tenant in ("", "a/b", "x" * 65, 42, None):
        token = pyjwt.encode(
            {
                "tenant": tenant,
                "iss": "https://issuer.crux.test",
                "aud": audience,
                "exp": 4102444800,
            },  # fmt: skip
            api.credentials.jwt_secret,
            algorithm="HS256",
        )
        async with client(api.url, {"Authorization": f"Bearer {token}"}) as http:
            assert (await http.get("/v1/threads/x")).status_code == 401, tenant
