"""Run a success hook registered on the worker, after its generation's turn was committed."""

from __future__ import annotations

from temporalio import activity

from activities._registries import SuccessHookLookup
from contracts.acceptance import RunSuccessHookInput, RunSuccessHookResult
from telemetry.logs import get_logger
from vocabulary.gate_errors import SuccessHookError

_log = get_logger(__name__)


class SuccessHookRunner:
    """Runs success hooks by name.

    Args:
        hooks: The success hooks registered on this worker.
    """

    def __init__(self, hooks: SuccessHookLookup) -> None:
        self._hooks = hooks

    async def run(self, request: RunSuccessHookInput) -> RunSuccessHookResult:
        """Run the hook once on the committed turn's content-free context.

        Temporal retries a hook that raised, within the workflow's bounded policy, and runs
        it again after a worker was lost mid-hook: hooks run at least once, and
        `context.idempotency_key` is what makes their effects count once.

        Raises:
            SuccessHookError: `not_registered` (no such hook here) or `raised` (only the
                exception's class is kept: its message may quote anything).
        """
        attempt = activity.info().attempt if activity.in_activity() else 1
        context = request.context.model_copy(update={"attempt": attempt})
        hook = self._hooks.get(context.hook)
        if hook is None:
            raise SuccessHookError(context.hook, "not_registered")
        try:
            await hook.run(context)
        except Exception as error:  # user code: only the exception's type is reported
            _log.warning(
                "generation.success_hook.failed",
                hook=context.hook,
                generation_id=context.generation_id,
                thread_id=context.thread_id,
                attempt=attempt,
                error=type(error).__name__,
            )
            raise SuccessHookError(
                context.hook, "raised", error_type=type(error).__name__
            ) from None
        _log.info(
            "generation.success_hook.ran",
            hook=context.hook,
            generation_id=context.generation_id,
            thread_id=context.thread_id,
            attempt=attempt,
        )
        return RunSuccessHookResult(attempt=attempt)
