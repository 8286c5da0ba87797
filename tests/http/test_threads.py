"""Threads over HTTP: append with caller ids and replays, branches, edit, select, redact,
remove, delete; the caller's ids in, the caller's ids out."""

from __future__ import annotations

from urllib.parse import quote

import asyncpg

from tests.http.api import client
from tests.http.conftest import Api


def _path(thread_id: str, action: str = "") -> str:
    return f"/v1/threads/{quote(thread_id, safe='')}{'/' + action if action else ''}"


async def test_a_thread_is_written_read_branched_and_erased_over_http(
    api: Api, pool: asyncpg.Pool
) -> None:
    thread = "support/ticket:42"
    async with client(api.url, api.credentials.headers("acme")) as http:
        first = await http.post(
            _path(thread, "messages"),
            json={"messages": [{"id": "u1", "role": "user", "content": "Hello"}]},
        )
        assert first.status_code == 200, first.text
        assert first.json()["message_ids"] == ["u1"] and not first.json()["replayed"]
        again = await http.post(
            _path(thread, "messages"),
            json={"messages": [{"id": "u1", "role": "user", "content": "Hello"}]},
        )
        assert again.json()["replayed"] is True
        answer = await http.post(
            _path(thread, "messages"),
            json={"messages": [{"id": "a1", "role": "assistant", "content": "Hi!"}]},
        )
        assert answer.json()["parent_id"] == "u1"
        # An edit of the first message is a sibling branch, selected.
        edited = await http.post(
            _path(thread, "edit"), json={"message_id": "u1", "content": "Hello again", "id": "u1b"}
        )
        assert edited.status_code == 200, edited.text
        snapshot = (await http.get(_path(thread))).json()
        assert snapshot["thread_id"] == thread
        assert [e["id"] for e in snapshot["entries"]] == ["u1b"]
        assert snapshot["entries"][0]["variant"] == {
            "index": 1, "count": 2, "previous": "u1", "next": None
        }  # fmt: skip
        # Select the first branch back: its continuation is restored.
        selected = await http.post(_path(thread, "select"), json={"message_id": "u1"})
        assert [e["id"] for e in selected.json()["entries"]] == ["u1", "a1"]
        assert selected.json()["thread_id"] == thread
        page = (await http.get(_path(thread), params={"limit": 1})).json()
        assert [e["id"] for e in page["entries"]] == ["a1"] and page["cursor"] == "a1"
        branch = (await http.get(_path(thread), params={"at": "u1b"})).json()
        assert [e["id"] for e in branch["entries"]] == ["u1b"]
        # Remove hides the assistant's group; redact leaves a tombstone.
        removed = await http.post(_path(thread, "remove"), json={"message_id": "a1"})
        assert removed.status_code == 204
        redacted = await http.post(_path(thread, "redact"), json={"ids": ["u1"]})
        assert redacted.status_code == 204
        entries = (await http.get(_path(thread))).json()["entries"]
        assert [(e["kind"], e["id"]) for e in entries] == [("redacted", "u1"), ("removed", "a1")]
        # Stored under the tenant's scope, never under the caller's bare id.
        stored = await pool.fetchval(
            "SELECT count(*) FROM crux_thread_messages WHERE thread_id = $1", f"t/acme/{thread}"
        )
        assert stored == 3
        assert (await http.delete(_path(thread))).status_code == 204
        assert (await http.delete(_path(thread))).status_code == 204
        gone = await http.get(_path(thread))
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
        missing = await http.delete(_path("never-written"))
        assert missing.status_code == 404
        assert missing.json() == gone.json()


async def test_invalid_requests_name_fields_never_values(api: Api) -> None:
    secret = "do-not-echo-this-text"
    async with client(api.url, api.credentials.headers("acme")) as http:
        bad = await http.post(
            _path("t1", "messages"),
            json={"messages": [{"id": "m", "role": "narrator", "content": secret}]},
        )
        assert bad.status_code == 422
        body = bad.json()["error"]
        assert body["code"] == "invalid_request" and "role" in body["message"]
        assert secret not in bad.text
        unknown = await http.post(_path("t1", "messages"), json={"messages": [], "extra": secret})
        assert unknown.status_code == 422 and secret not in unknown.text
        nul = await http.post(
            _path("t1", "messages"),
            json={"messages": [{"id": "m", "role": "user", "content": "a\u0000b"}]},
        )
        assert nul.status_code == 422 and nul.json()["error"]["type"] == "ThreadError"
        control = await http.get(_path("bad\u0001id"))
        assert control.status_code == 422
