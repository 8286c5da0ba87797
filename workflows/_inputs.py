"""The activity inputs of one generation, built from the request, the read and the plan.

Pure functions over pure data: ids, sizes and decisions only, never message text.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts.activities import (
    CommitTurnInput,
    CountRequestInput,
    InvokeModelInput,
    PlanAhead,
    ReadRequestInput,
    ReadRequestResult,
    RunToolInput,
)
from contracts.generation import GenerationInput, StepFigures, request_fingerprint
from contracts.planning import all_sources, read_bound, selected_sources
from contracts.settings import ToolPolicySpec
from planner import SealedPlan, source_ids
from workflows._progress import TurnProgress


def read_input(request: GenerationInput, plan_ahead: PlanAhead | None = None) -> ReadRequestInput:
    """Read the current revision and size everything the plan needs.

    With `plan_ahead`, the read also seals and records the first plan (see `PlanAhead`).
    """
    return ReadRequestInput(
        generation_id=request.generation_id,
        thread_id=request.thread_id,
        owner=request.owner,
        model=request.model,
        prompt_id=request.prompt_id,
        input=request.input,
        input_ref=request.input_ref,
        messages_ref=request.messages_ref,
        history=request.history,
        tools=request.tools,
        output_schema=request.output.json_schema if request.output else None,
        context_source_ids=[
            source for contributor in request.contributors for source in source_ids(contributor)
        ],
        max_input_tokens=read_bound(request.model, request),
        input_budget=request.input_budget,
        max_output_tokens=request.max_output_tokens,
        # The reader bounds the skeleton with the worker's own catalog (custom profiles).
        derive_ceiling=True,
        # Inline input is in the workflow input already: its fingerprint lets the read
        # refuse a reused id with other content. The facade records its own.
        fingerprint=(
            request_fingerprint(request, [request.input]) if request.input_ref is None else None
        ),
        include_reply=request.include_reply,
        # A hook may widen a step's budget beyond the read's, and a tool round grows the
        # turn so that a later step may need a summary over other groups than the first
        # step's: the read then cuts nothing.
        keep_listing=(
            request.prepare_step is not None
            or request.prepare_invocation is not None
            or bool(request.tools)
        ),
        plan_ahead=plan_ahead,
    )


def count_input(
    request: GenerationInput, read: ReadRequestResult, message_ranges: tuple[tuple[int, int], ...]
) -> CountRequestInput:
    """Count the whole request, every contributor at its full rung, with the provider."""
    return CountRequestInput(
        generation_id=request.generation_id,
        thread_id=request.thread_id,
        history_source=read.history_source,
        model=request.model,
        message_ranges=list(message_ranges),
        owner=request.owner,
        context=all_sources(request.contributors),
    )


def invoke_input(
    request: GenerationInput,
    read: ReadRequestResult,
    sealed: SealedPlan,
    progress: TurnProgress,
    *,
    commit: bool = False,
) -> InvokeModelInput:
    """Send what the sealed plan chose, as this attempt.

    With `commit`, an answer that ends the turn is published by the attempt itself (see
    `InvokeModelInput.commit`).
    """
    summary = sealed.history_summary
    return InvokeModelInput(
        generation_id=request.generation_id,
        attempt=progress.attempt,
        thread_id=request.thread_id,
        owner=request.owner,
        revision=read.revision,
        history_source=read.history_source,
        model=request.model,
        message_ranges=list(sealed.message_ranges),
        context=selected_sources(request.contributors, sealed),
        summary_artifact_id=summary.artifact_id if summary else None,
        summary_position=summary.position if summary else 0,
        max_output_tokens=sealed.max_output_tokens,
        tools=request.tools,
        tool_choice=progress.tool_choice(request),
        turn_messages=progress.turn_messages,
        stream=request.stream,
        settings=request.settings,
        output_schema=request.output.json_schema if request.output else None,
        output_prompt_id=request.prompt_id if request.output else None,
        request_id=sealed.request_id,
        commit=pending_commit(request, read, progress) if commit else None,
    )


def tool_input(
    request: GenerationInput,
    call_turn_index: int,
    call_index: int,
    result_turn_index: int,
    tool_name: str = "",
    declared: Mapping[str, ToolPolicySpec] | None = None,
) -> RunToolInput:
    """Run one tool call of the staged assistant message (with its tool's policy).

    The input's policy for the tool wins over the one declared with it on the worker.
    """
    policy = None
    if tool_name:
        policy = request.tool_policies.get(tool_name) or (declared or {}).get(tool_name)
    return RunToolInput(
        policy=policy,
        generation_id=request.generation_id,
        thread_id=request.thread_id,
        model=request.model,
        call_turn_index=call_turn_index,
        call_index=call_index,
        result_turn_index=result_turn_index,
    )


def commit_input(
    request: GenerationInput,
    read: ReadRequestResult,
    progress: TurnProgress,
    steps: list[StepFigures],
) -> CommitTurnInput:
    """Publish the accepted turn after the head the read observed.

    Steps name their receipts by request id: each was recorded before its attempt. The last
    one is the answer's: its content tokens follow the turn's other messages.
    """
    pending = pending_commit(request, read, progress)
    return pending.model_copy(
        update={
            "steps": steps,
            "message_tokens": [*pending.message_tokens, steps[-1].output_tokens],
        }
    )


def pending_commit(
    request: GenerationInput, read: ReadRequestResult, progress: TurnProgress
) -> CommitTurnInput:
    """The commit of the turn before the attempt that answers it: `commit_input` less that step.

    `pending_commit(...).answered_by(step)` equals `commit_input(...)` once `progress` has
    accepted `step`.
    """
    return CommitTurnInput(
        generation_id=request.generation_id,
        # A composition member runs under its parent's id, not the generation's own.
        workflow_id=request.workflow_id(),
        thread_id=request.thread_id,
        owner=request.owner,
        expected_head=read.head,
        accepted_attempt=progress.attempt,
        history_source=read.history_source,
        turn_messages=progress.turn_messages,
        message_tokens=[read.current_turn_tokens, *progress.turn_counts],
        encoding=read.encoding,
        steps=list(progress.steps),
        include_reply=request.include_reply,
    )
