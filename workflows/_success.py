"""Success hooks: run after the commit succeeded, at least once each, never before it.

Each hook is its own `crux.run_success_hook` activity, scheduled only once the turn is
published, so a hook never sees a turn that could still vanish. The hooks of a generation
run concurrently; a hook that keeps failing ends as a `failed` outcome (its error's class
only) and the turn stays committed. Nothing here runs for a generation naming no hook.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.exceptions import TimeoutError as ActivityTimeout

from contracts import stubs
from contracts.acceptance import RunSuccessHookInput, SuccessContext, SuccessHookOutcome
from contracts.generation import GenerationInput, GenerationOutcome
from vocabulary.details import decode_details
from vocabulary.ids import generation_key
from vocabulary.stages import Stage
from workflows import _options
from workflows._stages import StageReporter


async def run_success_hooks(
    stages: StageReporter, request: GenerationInput, outcome: GenerationOutcome
) -> tuple[SuccessHookOutcome, ...]:
    """Run the generation's success hooks on its committed turn; report how each ended."""
    if not request.on_success:
        return ()
    stages.set(Stage.SUCCESS_HOOKS, f"{len(request.on_success)} hooks")
    stages.publish()
    commit = outcome.thread_commit
    base = SuccessContext(
        hook=request.on_success[0],
        generation_id=request.generation_id,
        idempotency_key=generation_key(request.generation_id, request.thread_id),
        thread_id=request.thread_id,
        output_message_id=outcome.output_message_id,
        commit_status=commit.status if commit is not None else None,
        model=request.model,
        prompt_id=request.prompt_id,
        agent_id=request.agent_id,
        input_tokens=outcome.usage.input_tokens,
        output_tokens=outcome.usage.output_tokens,
    )
    outcomes = await asyncio.gather(
        *(_run(base.model_copy(update={"hook": hook})) for hook in request.on_success)
    )
    failed = sum(1 for o in outcomes if o.status == "failed")
    stages.set(Stage.SUCCESS_HOOKS, f"{len(outcomes) - failed} ok, {failed} failed")
    return tuple(outcomes)


async def _run(context: SuccessContext) -> SuccessHookOutcome:
    config = _options.with_summary(_options.RUN_SUCCESS_HOOK, f"success hook {context.hook}")
    try:
        ran = await workflow.execute_activity(
            stubs.run_success_hook, RunSuccessHookInput(context=context), **config
        )
    except ActivityError as error:
        return SuccessHookOutcome(
            hook=context.hook,
            status="failed",
            error_type=_error_type(error),
            attempts=_attempts(error),
        )
    return SuccessHookOutcome(hook=context.hook, status="ok", attempts=ran.attempt)


def _error_type(error: ActivityError) -> str:
    """The class of the hook's last exception, or why it never ran to an end."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        details = decode_details(cause.details, cause.type)
        raised = details.diagnostics.get("error_type")
        if isinstance(raised, str):
            return raised
        return details.code or cause.type or "ApplicationError"
    if isinstance(cause, ActivityTimeout):
        return "timeout"
    return type(cause or error).__name__


def _attempts(error: ActivityError) -> int:
    """How many tries the failed hook had (all of them, unless it could not be retried)."""
    if error.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        policy = _options.RUN_SUCCESS_HOOK.get("retry_policy")
        return policy.maximum_attempts if policy is not None else 1
    return 1
