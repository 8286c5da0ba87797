"""The pinned revision, checked before a sealed plan is answered (by a provider or the cache).

A plan names history by positions on the Thread's selected path at the revision it was
sealed on. Before anything answers it, the path is read again: if the Thread moved, the
positions may name other messages and nothing is sent (the workflow re-plans, or fails
under `on_revision_moved="fail"`). After an answer is staged, a redaction that landed
meanwhile drops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from activities._assembly import AssembledRequest, RequestAssembler, TurnParts
from activities._inputs import scoped_key
from contracts.activities import InvokeModelInput
from storage import GenerationStore, ThreadStore
from vocabulary.errors import ThreadError
from vocabulary.messages import Message


@dataclass(frozen=True)
class PinnedHistory:
    """A sealed plan's Thread history, read at the pinned revision.

    Attributes:
        sources: The Thread message ids the plan's positions name.
        messages: Those messages, in order (`None` when the plan's history is not a
            Thread's: the assembler reads what the plan names).
    """

    sources: list[str]
    messages: list[Message] | None


async def pinned_history(threads: ThreadStore, request: InvokeModelInput) -> PinnedHistory | None:
    """The plan's history messages and their ids, `None` if the Thread moved.

    One walk of the path checks the pinned revision, maps the positions and returns the
    messages at them (a plan sealed on another revision would name other messages), so an
    attempt or a cache lookup reads the Thread once and looks no message up by id.
    """
    if request.history_source != "thread" or not request.thread_id:
        return PinnedHistory(sources=[], messages=None)
    if not request.message_ranges:
        if request.revision:
            try:
                await threads.validate_revision(
                    request.thread_id, request.revision, owner=request.owner
                )
            except ThreadError as moved:
                if moved.code != "identity_conflict":
                    raise  # deleted: nothing can be committed any more
                return None
        return PinnedHistory(sources=[], messages=[])
    selection = await threads.selected(
        request.thread_id,
        owner=request.owner,
        ranges=request.message_ranges,
        revision=request.revision or None,
    )
    if selection is None:
        return None
    return PinnedHistory(sources=list(selection.ids), messages=selection.messages)


@dataclass(frozen=True)
class PlannedRequest:
    """A sealed plan's request, rebuilt at the pinned revision.

    Attributes:
        sources: The Thread message ids the plan's positions name.
        assembled: The messages it sends, by part.
    """

    sources: list[str]
    assembled: AssembledRequest


@dataclass(frozen=True)
class PlanReads:
    """What a sealed plan sends, read at once (each part, or why its read failed).

    Attributes:
        pinned: The plan's history at the pinned revision (`None`: the Thread moved).
        parts: Everything else the plan sends.
    """

    pinned: PinnedHistory | None | BaseException
    parts: TurnParts | BaseException

    async def planned(
        self, assembler: RequestAssembler, request: InvokeModelInput
    ) -> PlannedRequest | None:
        """The plan's request, `None` if the Thread moved (that wins over a failed read).

        Raises:
            Exception: Whatever failed a read.
        """
        pinned, parts = self.pinned, self.parts
        if isinstance(pinned, BaseException):
            raise pinned
        if pinned is None:
            return None
        if isinstance(parts, BaseException):
            raise parts
        history = pinned.messages
        if history is None:
            # Call-site messages: the plan's ranges over the staged transcript.
            history = await assembler.history_messages(
                scoped_key(request),
                request.thread_id,
                request.history_source,
                pinned.sources,
                request.message_ranges,
            )
        return PlannedRequest(sources=pinned.sources, assembled=parts.assembled(history))


async def plan_reads(
    threads: ThreadStore, assembler: RequestAssembler, request: InvokeModelInput
) -> PlanReads:
    """Read the plan's history at the pinned revision and everything else it sends, at once.

    Read only, so an attempt starts it beside its lookups of an earlier try, before it
    knows whether it still calls the provider; failures are kept for `PlanReads.planned`.
    """
    pinned, parts = await asyncio.gather(
        pinned_history(threads, request),
        assembler.turn_parts(
            scoped_key(request),
            request.thread_id,
            request.history_source,
            request.context,
            request.turn_messages,
            summary=(request.summary_artifact_id, request.summary_position),
        ),
        return_exceptions=True,
    )
    return PlanReads(pinned=pinned, parts=parts)


async def refuse_if_sources_redacted(
    threads: ThreadStore,
    generations: GenerationStore,
    request: InvokeModelInput,
    sources: Sequence[str],
) -> None:
    """Drop an attempt's staged output if a message it was built from was redacted meanwhile.

    The redaction cascade deletes staged rows derived from redacted messages, but a
    redaction that lands while the answer is being made runs before the answer is staged.

    Raises:
        ThreadError: The Thread was deleted, or a source message was redacted.
    """
    if request.history_source != "thread" or not request.thread_id or not request.revision:
        return
    try:
        await threads.validate_revision(request.thread_id, request.revision, owner=request.owner)
        return  # Nothing changed at all: the common case costs one indexed read.
    except ThreadError as moved:
        if moved.code != "identity_conflict":
            await generations.drop_staged(scoped_key(request), request.attempt)
            raise
    try:
        # The Thread moved (new turns are legitimate); check the sources themselves.
        await threads.load_messages(request.thread_id, sources)
    except ThreadError:
        await generations.drop_staged(scoped_key(request), request.attempt)
        raise
