"""A tool round of a generation run: each call as its own activity, approvals first.

A call of a tool that requires approval waits for its decision before its activity is
scheduled; a denied call still runs the activity, which stages the fixed denial result in
place of the handler's, so the model's next request carries it and the turn commits it.
"""

from __future__ import annotations

from temporalio import workflow

from contracts import stubs
from contracts.activities import (
    InvokeModelResult,
    RunToolInput,
    RunToolResult,
)
from contracts.generation import GenerationInput
from contracts.settings import ToolPolicySpec
from vocabulary.stages import Stage
from workflows import _inputs, _options
from workflows._approvals import Approvals
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows._storage_wait import waiting_out_storage


async def run_tools(
    stages: StageReporter,
    approvals: Approvals,
    request: GenerationInput,
    invoked: InvokeModelResult,
    progress: TurnProgress,
    declared: dict[str, ToolPolicySpec],
    *,
    declared_approval: list[str] | None = None,
) -> None:
    """Run each tool call of the staged assistant message as its own activity.

    Calls of tools that require approval (named by the input, or declared so on the
    worker: `declared_approval`) wait for their decision first.
    """
    call_turn_index = progress.turn_messages
    progress.add_turn_message(invoked.turn_tokens)
    names = [tool_name(invoked, index) for index in range(len(invoked.tool_call_ids))]
    approvals.offer(request, list(invoked.tool_call_ids), names, declared_approval or [])
    for call_index, call_id in enumerate(invoked.tool_call_ids):
        details = f"round {progress.rounds + 1}: call {call_index + 1}"
        denied: str | None = None
        if approvals.requires(call_id):
            denied = await approvals.await_decision(stages, request, call_id, details)
        stages.set(Stage.TOOLS, details)
        arg = _inputs.tool_input(
            request,
            call_turn_index,
            call_index,
            progress.turn_messages,
            names[call_index],
            declared,
        )
        if denied is not None:
            arg = arg.model_copy(update={"denied": denied})
        ran = await _run_tool(stages, request, arg, f"tool call {call_index + 1}")
        progress.add_turn_message(ran.tokens)
    approvals.close_round()
    progress.rounds += 1


async def _run_tool(
    stages: StageReporter, request: GenerationInput, arg: RunToolInput, summary: str
) -> RunToolResult:
    config = _options.with_summary(_options.run_tool(arg.policy), summary)
    return await waiting_out_storage(
        stages,
        request,
        Stage.TOOLS,
        lambda: workflow.execute_activity(stubs.run_tool, arg, **config),
    )


def tool_name(invoked: InvokeModelResult, call_index: int) -> str:
    """The offered tool a call names; `""` when unknown or not reported."""
    names = invoked.tool_names
    return names[call_index] if call_index < len(names) else ""
