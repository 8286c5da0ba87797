"""Managed history in a tool round whose Thread moves: each step gets the summary it needs.

A tool-round generation prepares an inline summary for its first provider call; while its
tool runs, two long turns land on the Thread. The second call re-reads the moved Thread,
and the summary prepared for the first call no longer fits with the gap it leaves: the
generation prepares the summary this step needs instead of failing with
`REPRESENTATION_UNAVAILABLE`.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from temporalio.client import Client

import crux
from crux.messages import Message
from providers.loopback import (
    LoopbackOpenAIServer,
    RecordedRequest,
    Reply,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage import ThreadStore
from tests.helpers import new_worker, settings_for

MODEL = "openai:gpt-4o"
BUDGET = 260
"""Fits a fresh summary with the new suffix, not the first step's summary with its gap."""
SUMMARY_MODEL = "openai:gpt-4o-mini"
LONG = (
    "The quarterly logistics review covered warehouse capacity in the northern region, the "
    "renewal terms of three carrier contracts, fuel surcharges, and a plan for seasonal staff "
    "with numbers for each site and each month of the coming quarter, item {n}."
)


def _respond(request: RecordedRequest) -> Reply:
    body: dict[str, Any] = request.body if isinstance(request.body, dict) else {}
    if body.get("model") == SUMMARY_MODEL.partition(":")[2]:
        return TextReply(text="Earlier: the logistics review and its numbers.")
    messages: list[dict[str, Any]] = body.get("messages") or [{}]
    if messages[-1].get("role") == "tool":
        return TextReply(text="Looked up and answered.")
    return tool_call_reply(ScriptedToolCall(name="lookup", arguments={"key": "k1"}))


async def run_tool_round_on_a_moving_thread(
    client: Client, pool: asyncpg.Pool, database_url: str, generation_id: str
) -> tuple[str, crux.Generation, list[str]]:
    """Run the scenario; return the Thread, the generation and the kinds of provider calls."""
    thread_id = f"perstep:{uuid.uuid4().hex[:6]}"
    store = ThreadStore(pool)
    for n in range(6):
        await store.append(
            thread_id,
            [
                Message(role="user", content=LONG.format(n=n)),
                Message(role="assistant", content=LONG.format(n=n + 100)),
            ],
        )

    async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
        # Another conversation turn lands while the tool runs.
        await store.append(
            thread_id,
            [
                Message(role="user", content=LONG.format(n=200)),
                Message(role="assistant", content=LONG.format(n=201)),
            ],
        )
        return {"key": arguments["key"], "fact": "known"}

    tool = crux.tool("lookup", lookup, parameters={"type": "object", "properties": {}})
    prompt = crux.prompt(
        id="perstep",
        use=[crux.history(recent={"messages": 2}, summary={"model": SUMMARY_MODEL}), tool],
    )
    async with LoopbackOpenAIServer(responder=_respond) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings, tools=[tool]) as worker:
            result = await worker.runtime.generate(
                prompt,
                input="What did the review decide?",
                thread=thread_id,
                model=MODEL,
                input_budget={"max": BUDGET},
                generation_id=generation_id,
            )
        calls = [
            "summary" if r.body["model"] == SUMMARY_MODEL.partition(":")[2] else "main"
            for r in server.requests
        ]
    return thread_id, result, calls


async def test_a_tool_round_prepares_the_summary_its_second_call_needs_after_the_thread_moved(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    _, result, calls = await run_tool_round_on_a_moving_thread(
        client, pool, database_url, "perstep-1"
    )

    assert result.text == "Looked up and answered."
    first, second = (step.request for step in result.steps)
    assert first.summary_path is not None and second.summary_path is not None
    assert first.input_tokens <= BUDGET and second.input_tokens <= BUDGET
    assert "HISTORY_SUMMARY_INLINE" in {w.code for w in second.warnings}
    assert "HISTORY_SUMMARY_STALE" not in {w.code for w in second.warnings}
    # One preparation per step, each before its call (maintenance may follow the commit).
    last_main = len(calls) - 1 - calls[::-1].index("main")
    assert calls[: last_main + 1] == ["summary", "main", "summary", "main"]
    commit = result.thread_commit
    assert commit is not None and commit.status == "selected"
    assert len(commit.message_ids) == 4
