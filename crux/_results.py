"""What a finished generation left in PostgreSQL: its result, its text, its receipts.

The workflow returns ids only; the result, the output message and the receipts are read
back here, from any process and after restarts.
"""

from __future__ import annotations

from pydantic import ValidationError

from contracts.generation import GenerationResult
from crux._outcomes import Finished, Generation, as_finished, stored_result
from crux.output import Output
from planner import RequestInspection, RequestReceipt
from storage import GenerationStore, ThreadStore
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    assistant_message_id,
    check_wire_id,
    generation_key,
)
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

MAX_REQUEST_ID_LENGTH = 256
"""Longest request id looked up (the workflow's ids are far shorter)."""


def _generation(result: GenerationResult, message: Message, output: Output | None) -> Generation:
    """The generation of `result` and its final `message`, parsed as `output` when asked."""
    value = output.parse(message.text) if output is not None else None
    return Generation(text=message.text, message=message, result=result, output=value)


class StoredResults:
    """Reads finished generations and request receipts.

    Args:
        generations: Staging, results and receipts.
        threads: The Thread store (a managed generation's output is a Thread message).
    """

    def __init__(self, generations: GenerationStore, threads: ThreadStore) -> None:
        self._generations = generations
        self._threads = threads

    async def finished(
        self, finished: Finished, output: Output | None = None, *, erase: bool = True
    ) -> Generation:
        """The generation a finished workflow committed, its structured output parsed.

        Raises:
            ThreadError: `not_found` when the result or the reply is no longer stored.
            OutputValidationError: The stored reply does not parse as `output`.
        """
        if finished.thread_id is None or (finished.thread_commit is None and not finished.noticed):
            result = await stored_result(self._generations, finished)
            return await self.generation(result, output, erase=erase)
        # A committed turn's reply is the Thread message its generation id names: it is
        # read with the result, in one statement. Anything else (a reply no Thread holds,
        # one redacted since) takes the result's own path, which says what is missing.
        reply_id = assistant_message_id(finished.generation_id)
        found, reply = await self._generations.find_result_and_reply(
            generation_key(finished.generation_id, finished.thread_id),
            finished.thread_id,
            reply_id,
        )
        stored = as_finished(found, finished)
        if reply is None or reply_id != stored.output_message_id:
            return await self.generation(stored, output, erase=erase)
        return _generation(stored, reply, output)

    async def generation(
        self, result: GenerationResult, output: Output | None = None, *, erase: bool = True
    ) -> Generation:
        """`result` with its final message (from the Thread, or staging when ad hoc).

        The reply of a generation that committed to no Thread is kept in staging only for
        its caller: once read here it is erased (`erase=False` keeps it, for a caller that
        will read it again), so its text does not wait for the retention sweep.
        """
        if result.thread_commit is not None and result.thread_id is not None:
            [message] = await self._threads.load_messages(
                result.thread_id, [result.output_message_id]
            )
        else:
            key = generation_key(result.generation_id, result.thread_id)
            staged = await self._generations.get_staged(key, 0, StagingKind.FINAL)
            if staged is None:
                raise ThreadError(
                    "not_found",
                    "the generation's reply is no longer stored: a reply that no Thread"
                    " holds is erased once read, so read it once (or keep what you read)",
                )
            message = staged.message
        generation = _generation(result, message, output)
        if erase and result.thread_commit is None:
            # Parsed first: a reply that fails its output schema raises before it is erased.
            await self._generations.erase_reply(
                generation_key(result.generation_id, result.thread_id), result.thread_id
            )
        return generation

    async def read(self, generation_id: str, thread_id: str | None, *, erase: bool) -> Generation:
        """The stored result and reply of a finished generation (`Runtime.read_generation`).

        Raises:
            ThreadError: `not_found` when no finished generation has that id.
        """
        key = generation_key(checked_generation_id(generation_id), thread_id)
        result = await self._generations.find_result(key)
        if result is None:
            raise ThreadError("not_found", "no finished generation has that id (on that Thread)")
        return await self.generation(result, erase=erase)

    async def erase(self, generation_id: str, thread_id: str | None) -> bool:
        """Erase the kept reply of a generation that committed to no Thread.

        Returns:
            Whether a reply was erased (`False`: none was kept, or it was erased before).
        """
        key = generation_key(checked_generation_id(generation_id), thread_id)
        return await self._generations.erase_reply(key, thread_id)

    async def receipt(self, request_id: str) -> RequestReceipt:
        """The stored receipt of a request (`Runtime.receipt`)."""
        receipt, _ = await self._generations.get_receipt(_request_id(request_id))
        try:
            return RequestReceipt.model_validate(receipt)
        except ValidationError:
            # Not a request receipt (a support call's): say so without quoting the row.
            raise KeyError(request_id) from None

    async def inspection(self, request: RequestReceipt | str) -> RequestInspection:
        """The stored inspection of a request (`Runtime.inspect`)."""
        request_id = _request_id(request.id if isinstance(request, RequestReceipt) else request)
        _, inspection = await self._generations.get_receipt(request_id)
        if inspection is None:
            raise KeyError(request_id)
        return RequestInspection.model_validate(inspection)


def checked_generation_id(value: object) -> str:
    """`value` if it can be a generation id (checked before any query)."""
    return check_wire_id(value, "generation_id", limit=MAX_GENERATION_ID_LENGTH)


def thread_id_of(thread: object | None) -> str | None:
    """The id of a Thread given as a handle or an id; `None` for none.

    Raises:
        ConfigurationError: `thread` is neither a Thread handle nor an id.
    """
    if thread is None:
        return None
    value = thread if isinstance(thread, str) else getattr(thread, "id", None)
    if not isinstance(value, str):
        raise ConfigurationError("thread must be a Thread handle or an id")
    return check_wire_id(value, "thread", limit=MAX_SCOPE_ID_LENGTH)


def _request_id(value: object) -> str:
    """`value` if it can be a request id; a malformed one is refused before any query."""
    return check_wire_id(value, "request id", limit=MAX_REQUEST_ID_LENGTH)
