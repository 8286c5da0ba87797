"""A peer's Temporal worker in its own process, as its documentation sets one up.

Run: `.venv-bench/bin/python bench/peer_worker.py {pydantic-ai|agents-sdk} TASK_QUEUE` with
`TEMPORAL_ADDRESS`, `OPENAI_BASE_URL` and `OPENAI_API_KEY` set (the project root on
`PYTHONPATH`); it runs until SIGTERM or SIGINT.
"""

# The peers are installed in `.venv-bench` only, not in the environment the type checker uses.
# pyright: reportMissingImports=false

from __future__ import annotations

import asyncio
import os
import signal
import sys

from temporalio.client import Client
from temporalio.worker import Worker

PYDANTIC_AI = "pydantic-ai"
AGENTS_SDK = "agents-sdk"


async def main(system: str, task_queue: str) -> None:
    # Each worker imports its own peer only: a workflow sandbox re-imports the workflow's
    # module, and one peer's plugin does not pass the other peer's packages through.
    if system == PYDANTIC_AI:
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        from bench._peer_pydantic_ai import PydanticAIConversation

        plugin = PydanticAIPlugin()
        workflows: list[type] = [PydanticAIConversation]
    elif system == AGENTS_SDK:
        from agents import set_default_openai_api
        from temporalio.openai_agents import OpenAIAgentsPlugin

        from bench._peer_agents_sdk import AgentsSdkConversation

        # The loopback server speaks chat completions, not the Responses API.
        set_default_openai_api("chat_completions")
        plugin = OpenAIAgentsPlugin()
        workflows = [AgentsSdkConversation]
    else:
        raise SystemExit(f"unknown peer {system!r}: pick {PYDANTIC_AI} or {AGENTS_SDK}")
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=[plugin])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=workflows):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
