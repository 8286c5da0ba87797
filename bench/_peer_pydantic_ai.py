"""Pydantic AI's durable conversation, wired the way its documentation shows.

An `Agent` with the `TemporalDurability` capability runs inside a workflow that lists it in
`__pydantic_ai_agents__` (`PydanticAIWorkflow`); `PydanticAIPlugin` on the client and the
worker registers its model activity. The conversation continues with
`agent.run(question, message_history=transcript)`: the transcript is the workflow's input
every turn; the workflow returns the reply text. The model is OpenAI chat completions at
`OPENAI_BASE_URL` with `OPENAI_API_KEY` (the benchmark's loopback server, a dummy key).

Imported by `peer_worker.py` and `bench_peers.py`, in `.venv-bench` (the `bench` extra).
"""

# The peers are installed in `.venv-bench` only, not in the environment the type checker uses.
# pyright: reportMissingImports=false

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import ModelMessage

from bench._peer_model import MODEL

NAME = "pydantic-ai"

agent = Agent(f"openai-chat:{MODEL}", name="bench_assistant", capabilities=[TemporalDurability()])


@workflow.defn
class PydanticAIConversation(PydanticAIWorkflow):
    """One turn of a Pydantic AI conversation: the transcript in, the reply out."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, question: str, transcript: list[ModelMessage]) -> str:
        """Continue the conversation `transcript` with `question`."""
        result = await agent.run(question, message_history=transcript)
        return result.output
