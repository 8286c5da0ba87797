"""The last stage of a generation: publish the accepted turn and record its result."""

from __future__ import annotations

from activities._assembly import RequestAssembler
from activities._inputs import scoped_key
from contracts.activities import CommitTurnInput, CommitTurnResult
from contracts.generation import GenerationResult, Usage
from storage import GenerationStore, ThreadStore
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.ids import assistant_message_id
from vocabulary.staging import StagingKind

_log = get_logger(__name__)


class TurnCommitter:
    """Publishes an accepted turn as one causal group and records the generation.

    Args:
        threads: The canonical Thread store.
        generations: Staging, results and receipts.
        assembler: Reads the staged tool-round messages of the turn.
    """

    def __init__(
        self, threads: ThreadStore, generations: GenerationStore, assembler: RequestAssembler
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._assembler = assembler

    async def commit(self, request: CommitTurnInput) -> CommitTurnResult:
        """Publish the turn (once: a retry returns the recorded result) and record it."""
        existing = await self._generations.find_result(scoped_key(request))
        if existing is not None:
            return CommitTurnResult(result=existing)
        output = await self._generations.get_staged(
            scoped_key(request), request.accepted_attempt, StagingKind.OUTPUT
        )
        if output is None:
            raise ThreadError("not_found", "the accepted attempt's output is not staged")
        usage = Usage(
            input_tokens=sum(s.usage.input_tokens for s in request.steps),
            output_tokens=sum(s.usage.output_tokens for s in request.steps),
        )
        commit = None
        if request.history_source == "thread" and request.thread_id is not None:
            user = await self._generations.get_staged(scoped_key(request), 0, StagingKind.USER)
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
                await self._threads.store_token_counts(
                    request.thread_id,
                    request.encoding,
                    dict(zip(commit.message_ids, request.message_tokens, strict=True)),
                )
        inspections = {
            inspection.id: inspection.model_dump(mode="json") for inspection in request.inspections
        }
        result = GenerationResult(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            output_message_id=assistant_message_id(request.generation_id),
            thread_commit=commit,
            steps=tuple(request.steps),
            usage=usage,
            history_source=request.history_source,
        )
        stored = await self._generations.record_result(
            result,
            workflow_id=request.workflow_id,
            receipts=[
                (
                    receipt.id,
                    receipt.model_dump(mode="json"),
                    inspections.get(receipt.id),
                )
                for receipt in (*request.superseded, *(step.request for step in request.steps))
            ],
            keep_final=output.message if commit is None else None,
        )
        if commit is not None:
            _log.info(
                "thread.turn.committed",
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                status=commit.status,
                messages=len(commit.message_ids),
                replayed=commit.replayed,
            )
        return CommitTurnResult(result=stored)
