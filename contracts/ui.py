"""What the Temporal UI shows of a run from its start: its static summary and details.

The static summary (one line, set when the run starts) names the kind of run, the model and
the Thread; the static details add the ids and the call's shape. The facade sets them on the
runs it starts and the workflows on their children, from the same functions. Everything is
ids, names and counts: never content.
"""

from __future__ import annotations

from typing import Literal

from contracts.activities import PrepareSummaryInput
from contracts.generation import GenerationInput

RunKind = Literal["generate", "stream", "parallel member", "summary", "inline summary"]

# Temporal shows the summary on one line; ids are cut so the line stays readable and under
# the server's limits whatever a caller chose as ids.
_MAX_ID_CHARS = 64
_MAX_SUMMARY_CHARS = 200


def _short(value: str) -> str:
    return value if len(value) <= _MAX_ID_CHARS else value[: _MAX_ID_CHARS - 1] + "…"


def run_summary(
    kind: RunKind, *, model: str, thread_id: str | None, member: str | None = None
) -> str:
    """The one-line static summary: kind, model and Thread (`ad hoc` without one).

    Args:
        kind: `generate`, `stream`, `parallel member`, `summary` or `inline summary`.
        model: The model id.
        thread_id: The Thread, `None` for an ad-hoc generation.
        member: The member name of a parallel member.
    """
    label = f"{kind} {_short(member)}" if member else kind
    thread = f"thread {_short(thread_id)}" if thread_id else "ad hoc"
    return f"{label} · {_short(model)} · {thread}"[:_MAX_SUMMARY_CHARS]


def generation_summary(request: GenerationInput) -> str:
    """The static summary of a generation (its kind read from the input)."""
    if request.composition is not None:
        return run_summary(
            "parallel member",
            model=request.model,
            thread_id=request.thread_id,
            member=request.composition.member,
        )
    kind: RunKind = "stream" if request.stream else "generate"
    return run_summary(kind, model=request.model, thread_id=request.thread_id)


def generation_details(request: GenerationInput) -> str:
    """The static details of a generation: its ids and the shape of the call."""
    lines = [
        f"generation: {request.generation_id}",
        f"thread: {request.thread_id or 'none (ad hoc)'}",
        f"owner: {request.owner}",
        f"model: {request.model}",
        f"tools offered: {len(request.tools)}",
        f"structured output: {'yes' if request.output is not None else 'no'}",
    ]
    if request.agent_id:
        lines.append(f"agent: {request.agent_id}")
    if request.composition is not None:
        lines.append(f"parent: {request.composition.parent_workflow_id}")
    return "\n".join(lines)


def summary_run_summary(request: PrepareSummaryInput, *, inline: bool) -> str:
    """The static summary of a SummaryWorkflow."""
    kind: RunKind = "inline summary" if inline else "summary"
    return run_summary(kind, model=request.model, thread_id=request.thread_id)


def summary_run_details(request: PrepareSummaryInput) -> str:
    """The static details of a SummaryWorkflow."""
    return "\n".join(
        [
            f"thread: {request.thread_id or 'none'}",
            f"source: {request.source}",
            f"through message: {request.through_id}",
            f"strategy: {request.strategy}",
            f"model: {request.model}",
            f"for generation: {request.generation_id or 'none'}",
        ]
    )
