"""The last stage of a generation: publish the accepted turn and record its result.

The steps arrive as request ids and figures; their receipts were stored before each
attempt, so the complete result recorded here is assembled from PostgreSQL, and only its
ids and figures (`GenerationOutcome`) go back into Temporal history.
"""

from __future__ import annotations

import asyncio

from activities._assembly import RequestAssembler
from activities._inputs import scoped_key
from activities._local import uninterrupted
from activities._reply import with_reply
from contracts.activities import (
    CommitTurnInput,
    CommitTurnResult,
    InvokeModelInput,
    InvokeModelResult,
)
from contracts.generation import (
    GenerationOutcome,
    GenerationResult,
    StepRecord,
    Usage,
)
from planner import RequestReceipt
from storage import GenerationStore, ReceiptStore, ThreadStore
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.gathered import settled
from vocabulary.ids import assistant_message_id
from vocabulary.staging import StagingKind

_log = get_logger(__name__)

IN_ATTEMPT_COMMIT_SECONDS = 5.0
"""How long an attempt waits for the commit it runs itself (a few milliseconds normally).

Past it (a lock held, storage slow) the attempt reports its answer uncommitted and the
workflow's own commit takes over, visibly `committing` or `commit_blocked`; the publication
already under way finishes or rolls back on its own, and the commits are idempotent."""


class TurnCommitter:
    """Publishes an accepted turn as one causal group and records the generation.

    Args:
        threads: The canonical Thread store.
        generations: Staging, results and receipts.
        assembler: Reads the staged tool-round messages of the turn.
        receipts: The stored receipts the steps name.
    """

    def __init__(
        self,
        threads: ThreadStore,
        generations: GenerationStore,
        assembler: RequestAssembler,
        receipts: ReceiptStore,
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._assembler = assembler
        self._receipts = receipts

    async def commit(self, request: CommitTurnInput) -> CommitTurnResult:
        """Publish the turn (once: a retry returns the recorded outcome) and record it."""
        key = scoped_key(request)
        # Three independent reads at once, each on its own connection: the round trips of a
        # commit are most of its time (`vocabulary.gathered`).
        found, staged_or_error, steps_or_error = await asyncio.gather(
            self._generations.find_result(key),
            self._generations.get_staged_many(
                key, [(request.accepted_attempt, StagingKind.OUTPUT), (0, StagingKind.USER)]
            ),
            self._step_records(request),
            return_exceptions=True,
        )
        existing = settled(found)
        if existing is not None:
            return CommitTurnResult.of(await self._outcome(request, existing), request)
        staged = settled(staged_or_error)
        output = staged.get((request.accepted_attempt, StagingKind.OUTPUT))
        user = staged.get((0, StagingKind.USER))
        managed = request.history_source == "thread" and request.thread_id is not None
        if output is None or (managed and user is None):
            # Another try of this commit (one that outlived its attempt's wait, or a local
            # activity whose workflow task moved on) may have finished since the lookup
            # above: it records the result and drops the staging in one transaction.
            existing = await self._generations.find_result(key)
            if existing is not None:
                return CommitTurnResult.of(await self._outcome(request, existing), request)
        if output is None:
            raise ThreadError("not_found", "the accepted attempt's output is not staged")
        steps = settled(steps_or_error)
        usage = Usage(
            input_tokens=sum(s.usage.input_tokens for s in request.steps),
            output_tokens=sum(s.usage.output_tokens for s in request.steps),
        )
        commit = None
        counts: dict[str, int] = {}
        if managed and request.thread_id is not None:
            if user is None:
                raise ThreadError("not_found", "staged input is missing")
            turn = await self._assembler.turn_messages(scoped_key(request), request.turn_messages)
            commit = await self._threads.commit_managed_turn(
                request.thread_id,
                [user.message, *turn, output.message],
                expected_head=request.expected_head,
                owner=request.owner,
            )
            if request.encoding and len(request.message_tokens) == len(commit.message_ids):
                counts = dict(zip(commit.message_ids, request.message_tokens, strict=True))
        result = GenerationResult(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            output_message_id=assistant_message_id(request.generation_id),
            thread_commit=commit,
            steps=steps,
            usage=usage,
            history_source=request.history_source,
        )
        # The ledger keeps the complete result (receipts included) for the facade and for
        # replays; the workflow only ever sees its ids and figures.
        # The counts are a cache beside the result: both writes go out at once, and a
        # failure of either fails this try (a retry finds the result and reports it).
        recorded, counted = await asyncio.gather(
            self._generations.record_result(
                result,
                workflow_id=request.workflow_id,
                keep_final=output.message if commit is None else None,
            ),
            self._store_counts(request, counts),
            return_exceptions=True,
        )
        stored = settled(recorded)
        settled(counted)
        await self._announce(key)
        if commit is not None:
            _log.info(
                "thread.turn.committed",
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                status=commit.status,
                messages=len(commit.message_ids),
                replayed=commit.replayed,
            )
        return CommitTurnResult.of(await self._outcome(request, stored), request)

    async def _announce(self, key: str) -> None:
        """Tell a caller waiting on this generation that its commit is done.

        Only a shortcut: a caller that misses it is answered when the run closes, so a
        failure to send it fails nothing.
        """
        try:
            await self._generations.announce_result(key)
        except Exception as error:
            _log.warning("generation.result.unannounced", error_type=type(error).__name__)

    async def _store_counts(self, request: CommitTurnInput, counts: dict[str, int]) -> None:
        """Cache the committed messages' token counts (nothing when there are none)."""
        if counts and request.thread_id is not None and request.encoding:
            await self._threads.store_token_counts(request.thread_id, request.encoding, counts)

    async def publish_answer(
        self, attempt: InvokeModelInput, invoked: InvokeModelResult
    ) -> InvokeModelResult:
        """Publish the turn `invoked` answered, within its attempt (`InvokeModelInput.commit`).

        A commit that fails for any reason, or outlasts `IN_ATTEMPT_COMMIT_SECONDS`, leaves
        the answer staged and says nothing of it: the workflow then commits as it always
        does, waiting out storage visibly or failing typed, so nothing differs but where the
        commit ran.
        """
        commit = attempt.answered_commit(invoked)
        assert commit is not None
        try:
            committed = await asyncio.wait_for(
                uninterrupted(self.commit(commit)),
                IN_ATTEMPT_COMMIT_SECONDS,
            )
        except Exception as error:
            _log.warning(
                "thread.turn.commit_deferred",
                generation_id=attempt.generation_id,
                thread_id=attempt.thread_id,
                error_type=type(error).__name__,
            )
            return invoked
        return invoked.model_copy(update={"committed": committed})

    async def published(self, attempt: InvokeModelInput) -> InvokeModelResult | None:
        """The attempt's result when an earlier try of it published the turn already.

        A try that committed and then lost its completion is retried by Temporal: the
        retry reports that commit instead of calling the provider again.
        """
        assert attempt.commit is not None
        existing = await self._generations.find_result(scoped_key(attempt))
        if existing is None:
            return None
        return InvokeModelResult.published(await self._outcome(attempt.commit, existing))

    async def _outcome(
        self, request: CommitTurnInput, stored: GenerationResult
    ) -> GenerationOutcome:
        """The outcome of the stored result, with the reply text when the input asked."""
        outcome = GenerationOutcome.of(stored)
        if not request.include_reply:
            return outcome
        outcome = await with_reply(
            outcome, stored, threads=self._threads, generations=self._generations
        )
        if stored.thread_id is None:
            # The reply reaches its reader in the outcome: an ad-hoc generation keeps it no
            # longer (a replay of the same id answers `reply: None`).
            await self._generations.erase_reply(scoped_key(request))
        return outcome

    async def _step_records(self, request: CommitTurnInput) -> tuple[StepRecord, ...]:
        """The steps with the receipts recorded before their attempts."""
        stored = await self._receipts.load([step.request_id for step in request.steps])
        missing = [step.request_id for step in request.steps if step.request_id not in stored]
        if missing:
            raise ThreadError("not_found", f"{len(missing)} request receipt(s) are not stored")
        return tuple(
            StepRecord(
                attempt=step.attempt,
                request=RequestReceipt.model_validate(stored[step.request_id].receipt),
                usage=step.usage,
                finish_reason=step.finish_reason,
                output_tokens=step.output_tokens,
            )
            for step in request.steps
        )
