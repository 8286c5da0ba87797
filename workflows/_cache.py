"""The response cache's two steps in a generation: a lookup before dispatch, a write after.

- **lookup** (`stubs.lookup_cache`, a local activity): for the first provider call of a
  turn only (attempt 1: not a tool round, an overflow recovery or a corrective attempt),
  after the plan's receipt is recorded. The activity re-checks the pinned revision first;
  a moved revision comes back as a refused attempt, so the workflow re-plans (or fails
  under `on_revision_moved="fail"`) exactly as after a provider attempt refused for it. A
  hit stands for the provider's answer: its reply is staged under the attempt, and the rest
  of the turn (validation, the acceptance gate, the commit of a fresh user and assistant
  pair) runs as for any answer. A lookup that fails for another reason than a storage
  outage (an embedding endpoint down, say) is a miss: the cache is never required.
- **write** (`stubs.write_cache`, a local activity): after `commit_turn` returned, only when
  the accepted attempt was looked up and missed. The activity itself refuses to write for a
  generation whose commit is not recorded. A failed write loses one entry, never the turn:
  it is not retried past its own policy and never fails the generation.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import LocalActivityConfig

from contracts import stubs
from contracts.activities import InvokeModelInput, InvokeModelResult
from contracts.cache_activities import LookupCacheInput, WriteCacheInput
from contracts.generation import GenerationInput
from vocabulary.errors import ErrorType
from vocabulary.stages import Stage
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows._storage_wait import ActivityFailure, waiting_out_storage

LOOKUP_CACHE_LOCAL = LocalActivityConfig(
    # A few indexed reads, and for a semantic lookup one embedding request: a local
    # activity, so a hit costs no scheduling round trip (latency is what a cache is for).
    # A storage outage is waited out by the workflow like every stage's; anything else
    # after these tries is a miss.
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=2),
        maximum_attempts=3,
        non_retryable_error_types=[ErrorType.STORAGE_UNAVAILABLE.value],
    ),
    local_retry_threshold=timedelta(seconds=5),
    summary="cache lookup",
)

WRITE_CACHE_LOCAL = LocalActivityConfig(
    # One transaction after the commit. Bounded: the turn is committed whatever happens
    # here, and a pending row left behind is removed by the staging sweep.
    start_to_close_timeout=timedelta(seconds=10),
    schedule_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=2),
        maximum_attempts=3,
    ),
    summary="cache write",
)


class CacheSteps:
    """The cache's part of one generation run: which attempt missed, and its write."""

    def __init__(self) -> None:
        self._missed: set[int] = set()
        """Attempts whose latest lookup missed (the write stores only such an attempt)."""

    async def look_up(
        self,
        stages: StageReporter,
        request: GenerationInput,
        invoke: InvokeModelInput,
        request_id: str,
    ) -> InvokeModelResult | None:
        """Answer the attempt from the cache, if it can.

        Returns:
            The attempt's result on a hit, a refused attempt when the Thread moved, `None`
            to dispatch the attempt to the provider.
        """
        if request.cache is None or invoke.attempt != 1 or invoke.turn_messages:
            return None
        self._missed.discard(invoke.attempt)
        stages.set(Stage.INVOKING, f"attempt {invoke.attempt}: cache lookup")
        arg = LookupCacheInput(
            invoke=invoke, request_id=request_id, prompt_id=request.prompt_id, cache=request.cache
        )
        try:
            found = await waiting_out_storage(
                stages,
                request,
                Stage.INVOKING,
                lambda: workflow.execute_local_activity(
                    stubs.lookup_cache, arg, **LOOKUP_CACHE_LOCAL
                ),
                local=True,
            )
        except ActivityFailure:
            # The provider attempt re-checks everything the lookup checked.
            workflow.logger.warning("cache lookup failed; dispatching to the provider")
            return None
        if found.revision_moved:
            return InvokeModelResult.moved()
        if found.hit and found.attempt is not None:
            return found.attempt
        self._missed.add(invoke.attempt)
        return None

    async def write(self, request: GenerationInput, progress: TurnProgress) -> None:
        """Store the committed reply when its attempt missed (after the commit only)."""
        if request.cache is None or not progress.steps:
            return
        accepted = progress.steps[-1].attempt
        if accepted not in self._missed:
            return
        arg = WriteCacheInput(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            accepted_attempt=accepted,
            cache=request.cache,
        )
        try:
            await workflow.execute_local_activity(stubs.write_cache, arg, **WRITE_CACHE_LOCAL)
        except ActivityFailure:
            workflow.logger.warning("cache write failed; the turn stays committed")
