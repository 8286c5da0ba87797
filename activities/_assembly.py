"""Rebuild the provider-facing messages of a sealed plan from PostgreSQL.

Every attempt, count and commit reads the same staged rows by the same keys, so a retried
activity sends exactly what the plan measured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from activities._support import render_summary
from contracts.activities import HistorySource, SelectedSource
from storage import GenerationStore, SummaryScope, SummaryStore, ThreadStore
from vocabulary.errors import ThreadError
from vocabulary.messages import Message
from vocabulary.staging import StagingKind, context_kind, turn_kind


@dataclass(frozen=True)
class AssembledRequest:
    """A sealed plan's messages by part, in the order they are sent.

    Attributes:
        leading: System instructions with the context blocks, then context messages.
        history: The projected history (a summary where the plan placed it).
        user: The rendered user turn.
        turn: The tool-round messages of this turn so far.
    """

    leading: tuple[Message, ...]
    history: tuple[Message, ...]
    user: Message
    turn: tuple[Message, ...] = ()

    @property
    def messages(self) -> list[Message]:
        """Every message, in order."""
        return [*self.leading, *self.history, self.user, *self.turn]


@dataclass(frozen=True)
class TurnParts:
    """A sealed plan's messages but its history (see `RequestAssembler.turn_parts`).

    Attributes:
        leading: System instructions with the context blocks, then context messages.
        user: The rendered user turn.
        turn: The tool-round messages of this turn so far.
        summary: The rendered history summary the plan sends, if any.
        summary_position: Where it goes among the history messages.
    """

    leading: tuple[Message, ...]
    user: Message
    turn: tuple[Message, ...] = ()
    summary: Message | None = None
    summary_position: int = 0

    def assembled(self, history: Sequence[Message]) -> AssembledRequest:
        """The whole request, `history` being the plan's history messages."""
        read = list(history)
        if self.summary is not None:
            read.insert(self.summary_position, self.summary)
        return AssembledRequest(
            leading=self.leading, history=tuple(read), user=self.user, turn=self.turn
        )


class RequestAssembler:
    """Loads staged inputs, context sources, Thread messages, summaries and tool rounds.

    Args:
        threads: The canonical Thread store.
        generations: Generation staging.
        summaries: Summary artifacts.
    """

    def __init__(
        self, threads: ThreadStore, generations: GenerationStore, summaries: SummaryStore
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._summaries = summaries

    async def context_messages(self, input_ref: str, source_ids: list[str]) -> list[Message]:
        """The staged context sources, as messages, in the order asked."""
        messages: list[Message] = []
        for source_id in source_ids:
            staged = await self._generations.get_staged(input_ref, 0, context_kind(source_id))
            if staged is None:
                raise ThreadError("not_found", "a staged context source is missing")
            messages.append(staged.message)
        return messages

    async def request_messages(
        self,
        generation_id: str,
        thread_id: str | None,
        history_source: HistorySource,
        message_ids: Sequence[str],
        context: list[SelectedSource],
        turn_messages: int = 0,
        *,
        summary: tuple[str | None, int] = (None, 0),
        message_ranges: Sequence[tuple[int, int]] = (),
    ) -> list[Message]:
        """Rebuild the provider-facing messages of a sealed plan from PostgreSQL.

        A Thread's history arrives as `message_ids` (its positions mapped at the pinned
        revision); call-site history as the plan's `message_ranges` over the staged
        messages. Its history and the rest of the request are read at once.
        """
        parts, history = await asyncio.gather(
            self.turn_parts(
                generation_id, thread_id, history_source, context, turn_messages, summary=summary
            ),
            self.history_messages(
                generation_id, thread_id, history_source, message_ids, message_ranges
            ),
        )
        return parts.assembled(history).messages

    async def turn_parts(
        self,
        generation_id: str,
        thread_id: str | None,
        history_source: HistorySource,
        context: list[SelectedSource],
        turn_messages: int = 0,
        *,
        summary: tuple[str | None, int] = (None, 0),
    ) -> TurnParts:
        """Everything a sealed plan sends but its history, read from staging and storage.

        Independent of the history read, so an attempt reads both at once.
        """
        staged = await self._generations.get_staged_many(
            generation_id, [(0, StagingKind.USER), (0, StagingKind.SYSTEM)]
        )
        user = staged.get((0, StagingKind.USER))
        if user is None:
            raise ThreadError("not_found", "staged input is missing")
        system = staged.get((0, StagingKind.SYSTEM))
        artifact_id, position = summary
        scope = _summary_scope(history_source, thread_id)
        rendered: Message | None = None
        if artifact_id is not None and scope is not None:
            artifact = await self._summaries.get(scope, artifact_id)
            if artifact is None:
                # Erased (a covered message was redacted) after the plan was sealed.
                raise ThreadError("identity_conflict", "the planned summary no longer exists")
            rendered = render_summary(artifact.text)
        leading = await self._leading_messages(
            generation_id, system.message if system else None, context
        )
        turn = await self.turn_messages(generation_id, turn_messages)
        return TurnParts(
            leading=tuple(leading),
            user=user.message,
            turn=tuple(turn),
            summary=rendered,
            summary_position=position,
        )

    async def turn_messages(self, generation_id: str, count: int) -> list[Message]:
        """The first `count` tool-round messages staged for the turn."""
        messages: list[Message] = []
        for index in range(count):
            staged = await self._generations.get_staged(generation_id, 0, turn_kind(index))
            if staged is None:
                raise ThreadError("not_found", "a staged tool-round message is missing")
            messages.append(staged.message)
        return messages

    async def _leading_messages(
        self, generation_id: str, system: Message | None, context: list[SelectedSource]
    ) -> list[Message]:
        """System instructions with the planned context blocks, then context messages."""
        texts = await self.context_messages(generation_id, [s.id for s in context])
        blocks = [system.text] if system is not None and system.text else []
        own_messages: list[Message] = []
        for selected, staged in zip(context, texts, strict=True):
            if selected.placement == "system":
                blocks.append(staged.text)
            else:
                own_messages.append(Message(role="system", content=staged.text))
        head = [Message(role="system", content="\n\n".join(blocks))] if blocks else []
        return [*head, *own_messages]

    async def history_messages(
        self,
        generation_id: str,
        thread_id: str | None,
        history_source: HistorySource,
        message_ids: Sequence[str],
        message_ranges: Sequence[tuple[int, int]],
    ) -> list[Message]:
        """The plan's history messages: Thread messages by id, or call-site ranges."""
        if history_source == "thread" and thread_id:
            if not message_ids:
                return []
            return await self._threads.load_messages(thread_id, message_ids)
        if history_source == "caller-messages" and message_ranges:
            # Call-site or prompt-level messages: only one of the two is ever staged.
            caller = await self._generations.get_staged_messages(
                generation_id, StagingKind.CALLER_MESSAGES
            )
            if caller is None:
                caller = await self._generations.get_staged_messages(
                    generation_id, "prompt-messages"
                )
            if caller is None:
                raise ThreadError("not_found", "staged call-site messages are missing")
            selected: list[Message] = []
            for start, end in message_ranges:
                if not 0 <= start <= end <= len(caller):
                    raise ThreadError("not_found", "staged call-site messages are missing")
                selected.extend(caller[start:end])
            return selected
        return []


def _summary_scope(history_source: HistorySource, thread_id: str | None) -> SummaryScope | None:
    """Where the summary a plan sends is stored: the Thread's, or the transcript's scope."""
    if history_source == "caller-messages":
        return SummaryScope.transcript(thread_id)
    return SummaryScope.thread(thread_id) if thread_id is not None else None
