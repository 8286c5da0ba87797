"""The OpenAI Agents SDK's durable conversation, wired the way its documentation shows.

`Runner.run(agent, input=items)` runs inside a workflow, on a worker and client carrying
`OpenAIAgentsPlugin`, which runs every model call as its model activity. The conversation
continues with the previous input items plus the new user message: the items are the
workflow's input every turn; the workflow returns the reply text. The model is OpenAI chat
completions at `OPENAI_BASE_URL` with `OPENAI_API_KEY` (the benchmark's loopback server, a
dummy key); the worker selects the chat-completions API (`set_default_openai_api`).

Imported by `peer_worker.py` and `bench_peers.py`, in `.venv-bench` (the `bench` extra).
"""

# The peers are installed in `.venv-bench` only, not in the environment the type checker uses.
# pyright: reportMissingImports=false

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner

from bench._peer_model import MODEL

NAME = "agents-sdk"

agent = Agent(name="bench_assistant", model=MODEL)


@workflow.defn
class AgentsSdkConversation:
    """One turn of an OpenAI Agents SDK conversation: the input items in, the reply out."""

    @workflow.run
    async def run(self, items: list[dict[str, Any]]) -> str:
        """Run the agent on `items` (the transcript, then the new user message)."""
        result = await Runner.run(agent, input=items)
        return str(result.final_output)
