"""Record histories of generations through the acceptance gate and the response cache.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `gate_*` and `cache_*` histories,
which `test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o-mini"


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_gate_and_cache_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"replay-gate:{uuid.uuid4().hex[:6]}"
    done: list[str] = []

    @crux.success_hook("notify")
    async def notify(turn: crux.SuccessContext) -> None:
        done.append(turn.generation_id)

    openai_server.enqueue(
        TextReply(text="no ticket here"),  # refused by the constraint: a corrective attempt
        TextReply(text="Ticket: 42"),
        TextReply(text="Ticket: 43"),
        TextReply(text="Paris"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    cache = crux.cache(namespace=f"replay-{uuid.uuid4().hex[:6]}")
    async with new_worker(client, pool, settings, success_hooks=[notify]) as worker:
        await worker.runtime.generate(
            "Mail me at someone@example.com",
            thread=thread_id,
            model=MODEL,
            generation_id="gate1",
            safety=crux.safety(input=[crux.safety.pii()], output=[crux.safety.deny(["secret"])]),
            constraints=crux.constraints(crux.constraints.require("Ticket:"), max_retries=1),
            on_success=[notify],
        )
        await worker.runtime.generate(
            "Another one",
            thread=thread_id,
            model=MODEL,
            generation_id="gate2",
            time_budget_seconds=60,
        )
        await worker.runtime.generate(
            "Capital of France?", model=MODEL, generation_id="cache1", cache=cache
        )
        await worker.runtime.generate(
            "Capital of France?", model=MODEL, generation_id="cache2", cache=cache
        )
    assert done == ["gate1"]
    for name, workflow_id in (
        ("gate_masked_constrained_hooked", workflow_id_for("gate1", thread_id)),
        ("gate_time_budget", workflow_id_for("gate2", thread_id)),
        ("cache_miss_written", workflow_id_for("cache1", None)),
        ("cache_hit", workflow_id_for("cache2", None)),
    ):
        await record_history(client, workflow_id, name)
