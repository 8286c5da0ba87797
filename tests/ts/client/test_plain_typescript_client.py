"""A plain TypeScript client (tests/ts/client) against a real worker, with only the contract.

The suite uses the real `@temporalio/client`, pinned in tests/ts/client/package-lock.json
and installed here with `npm ci` whenever the lock file changed (node_modules/ is not
checked in). It reads the published schemas/ folder: the workflow-id rule's test vectors and
the example inputs. Afterwards the Thread it wrote holds its turn exactly once.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import new_worker, settings_for
from tests.ts import node

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

SUITE = Path(__file__).parent
SCHEMAS = SUITE.parent.parent.parent / "schemas"


async def test_a_plain_typescript_client_meets_the_published_contract(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
) -> None:
    await node.installed(SUITE)
    await node.run(SUITE, "npx", "--no-install", "tsc", "-p", ".")
    # The decision test's run: slow enough to be running while the client decides.
    openai_server.enqueue(TextReply(text="Slowly.", delay_seconds=5))
    run = f"ts{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        env = {
            **os.environ,
            "CRUX_TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_NAMESPACE": client.namespace,
            "CRUX_TASK_QUEUE": worker.task_queue,
            "CRUX_SCHEMAS": str(SCHEMAS),
            "CRUX_RUN": run,
        }
        output = await node.run(
            SUITE,
            "node",
            "--test",
            "--test-concurrency=1",
            "--test-reporter=tap",
            "build/",
            env=env,
        )
    print(output[-3000:])
    assert "# fail 0" in output
    assert "# pass 6" in output
    # Started twice while running and once after: one turn in the Thread.
    view = await ThreadStore(pool).read_history_view(f"{run}:support")
    assert [message.role for message in view.messages] == ["user", "assistant"]
    assert len(openai_server.requests) == 1
