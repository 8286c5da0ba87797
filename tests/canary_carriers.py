"""The canary's carriers: a run's bookkeeping, the tools and hook that carry it, helpers.

Shared by the scenarios of `tests.canary_runs` and the leak tests in
`tests/e2e/test_canary_leaks.py`.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel
from temporalio.client import Client

import crux
from tests.leaks import LeakScan

MODEL = "openai:gpt-4o-mini"
ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
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
        runtime: crux.Runtime,
        task_queue: str,
        canary: str,
        scan: LeakScan,
        since: datetime,
        *,
        registered: bool = True,
    ) -> None:
        self.client = client
        self.pool = pool
        self.task_queue = task_queue
        self.since = since
        self.runtime = runtime
        self.registered = registered
        """Whether the worker has `canary_tools` and `canary_hook` (a `worker.py` has not)."""
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


async def pending(runtime: crux.Runtime, generation_id: str, thread: str) -> list[Any]:
    """The calls a run waits on; none while it has not started waiting yet."""
    try:
        return list(await runtime.pending_approvals(generation_id, thread=thread))
    except crux.CruxError:
        return []


async def append_conversation(pool: asyncpg.Pool, thread_id: str, canary: str, turns: int) -> None:
    conversation = crux.thread(id=thread_id, storage=pool)
    for turn in range(turns):
        await conversation.append(
            [
                {"role": "user", "content": f"Turn {turn}: my code word is {canary}, noted?"},
                {"role": "assistant", "content": f"Noted code word {canary} for turn {turn}."},
            ]
        )


def completion(raw_text: str) -> bytes:
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


async def drain(stream: Any) -> None:
    async for _update in stream:
        pass
