"""Stage a generation's inputs once: the rendered user turn, system text, context sources.

Rendering happens here (for prompts registered on the worker) or on the caller's side (the
facade stages under `input_ref`); either way every later stage reads the rows keyed by the
generation id, so retries see the same text.
"""

from __future__ import annotations

from typing import Literal, Protocol

from activities._registries import PromptLookup
from activities.rendering import render_turn
from contracts.activities import ReadRequestInput
from contracts.generation import GenerationResult
from storage import GenerationStore
from vocabulary.errors import ThreadError
from vocabulary.ids import generation_key, user_message_id
from vocabulary.messages import Message
from vocabulary.staging import MESSAGE_KINDS, StagingKind, context_kind

OverrideReason = Literal["explicit-messages", "prompt-messages"]
"""Why a message array shadowed the Thread (the `thread.history.override` reason)."""


class _Addressed(Protocol):
    @property
    def generation_id(self) -> str: ...

    @property
    def thread_id(self) -> str | None: ...


def scoped_key(request: _Addressed) -> str:
    """The storage key of the generation an activity input addresses (Thread-scoped)."""
    return generation_key(request.generation_id, request.thread_id)


def replayed(result: GenerationResult) -> GenerationResult:
    """A stored result returned again: it says so, and so does its Thread commit."""
    commit = result.thread_commit
    return result.model_copy(
        update={
            "replayed": True,
            "thread_commit": None
            if commit is None
            else commit.model_copy(update={"replayed": True}),
        }
    )


class InputStager:
    """Stages the inputs of a generation.

    Args:
        generations: Generation staging.
        prompts: Prompts that plain Temporal clients may name.
    """

    def __init__(self, generations: GenerationStore, prompts: PromptLookup) -> None:
        self._generations = generations
        self._prompts = prompts

    async def transcript(
        self, request: ReadRequestInput
    ) -> tuple[list[Message], OverrideReason] | None:
        """Select a message-array history source by precedence, or `None` when there is none.

        Call-site messages come first, then prompt-level messages (staged by the facade, or
        declared on a prompt registered on this worker); arrays are never merged. The
        winning array is staged under the generation, where the assembler reads it.

        Raises:
            ThreadError: `not_found` when the referenced staging is missing.
        """
        if request.messages_ref is not None:
            reasons: tuple[OverrideReason, ...] = ("explicit-messages", "prompt-messages")
            for kind, reason in zip(MESSAGE_KINDS, reasons, strict=True):
                staged = await self._generations.get_staged_messages(request.messages_ref, kind)
                if staged is not None:
                    return staged, reason
            raise ThreadError("not_found", "staged call-site messages are missing")
        if request.input_ref is not None:
            # The facade rendered this prompt and staged its messages, if it had any.
            return None
        declared = self._prompts.get(request.prompt_id).messages
        if declared is None:
            return None
        staged = await self._generations.stage_messages(
            scoped_key(request),
            StagingKind.PROMPT_MESSAGES,
            list(declared),
            thread_id=request.thread_id,
        )
        return staged, "prompt-messages"

    async def check_identity(self, request: ReadRequestInput) -> None:
        """Refuse a reused generation id whose request differs from the first one's.

        The facade records the fingerprint before it stages anything; a plain client's
        request carries it (`request.fingerprint`, computed by the workflow from the
        settings and the inline input). The first fingerprint recorded wins.

        Raises:
            ThreadError: `identity_conflict` when the fingerprints differ.
        """
        if request.fingerprint is None:
            return
        _, stored = await self._generations.claim_identity(
            scoped_key(request), request.fingerprint, thread_id=request.thread_id
        )
        if stored is not None and stored != request.fingerprint:
            raise ThreadError(
                "identity_conflict",
                "this generation_id was already used with a different request",
                thread_id=request.thread_id,
            )

    async def stage(self, request: ReadRequestInput) -> tuple[Message, Message | None]:
        """Stage (or find) the rendered user turn and system text under the generation."""
        message_scope = request.generation_id
        generation_id = scoped_key(request)
        if request.input_ref is not None:
            staged = await self._generations.get_staged_many(
                request.input_ref, [(0, StagingKind.USER), (0, StagingKind.SYSTEM)]
            )
            staged_user = staged.get((0, StagingKind.USER))
            if staged_user is None:
                raise ThreadError("not_found", "staged input is missing")
            staged_system = staged.get((0, StagingKind.SYSTEM))
            if request.input_ref == generation_id:
                return staged_user.message, staged_system.message if staged_system else None
            # Input staged under another id: copy it under this generation, so every later
            # stage (and a retried one) reads one place.
            user = await self._generations.stage(
                generation_id,
                0,
                StagingKind.USER,
                staged_user.message.model_copy(update={"id": user_message_id(message_scope)}),
                thread_id=request.thread_id,
            )
            system = None
            if staged_system is not None:
                copied = await self._generations.stage(
                    generation_id,
                    0,
                    StagingKind.SYSTEM,
                    staged_system.message,
                    thread_id=request.thread_id,
                )
                system = copied.message
            for source_id in request.context_source_ids:
                staged = await self._generations.get_staged(
                    request.input_ref, 0, context_kind(source_id)
                )
                if staged is None:
                    raise ThreadError("not_found", "a staged context source is missing")
                await self._generations.stage(
                    generation_id, 0, context_kind(source_id), staged.message,
                    thread_id=request.thread_id,
                )  # fmt: skip
            return user.message, system
        turn = render_turn(self._prompts.get(request.prompt_id), request.input, message_scope)
        staged_rows = [
            await self._generations.stage(
                generation_id, 0, kind, message, thread_id=request.thread_id
            )
            for kind, message in turn.staged()
        ]
        return staged_rows[0].message, staged_rows[1].message if turn.system else None
