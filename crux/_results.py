"""What a finished generation left in PostgreSQL: its result, its text, its receipts.

The workflow returns ids only; the result, the output message and the receipts are read
back here, from any process and after restarts.
"""

from __future__ import annotations

from pydantic import ValidationError

from contracts.generation import GenerationResult
from crux._outcomes import Finished, Generation, stored_result
from crux.output import Output
from planner import RequestInspection, RequestReceipt
from storage import GenerationStore, ThreadStore
from vocabulary.errors import ThreadError
from vocabulary.ids import check_wire_id, generation_key
from vocabulary.staging import StagingKind

MAX_REQUEST_ID_LENGTH = 256
"""Longest request id looked up (the workflow's ids are far shorter)."""


class StoredResults:
    """Reads finished generations and request receipts.

    Args:
        generations: Staging, results and receipts.
        threads: The Thread store (a managed generation's output is a Thread message).
    """

    def __init__(self, generations: GenerationStore, threads: ThreadStore) -> None:
        self._generations = generations
        self._threads = threads

    async def finished(self, finished: Finished, output: Output | None = None) -> Generation:
        """The generation a finished workflow committed, its structured output parsed.

        Raises:
            ThreadError: `not_found` when the result is no longer stored.
            OutputValidationError: The stored reply does not parse as `output`.
        """
        return await self.generation(await stored_result(self._generations, finished), output)

    async def generation(
        self, result: GenerationResult, output: Output | None = None
    ) -> Generation:
        """`result` with its final message (from the Thread, or staging when ad hoc)."""
        if result.thread_commit is not None and result.thread_id is not None:
            [message] = await self._threads.load_messages(
                result.thread_id, [result.output_message_id]
            )
        else:
            staged = await self._generations.get_staged(
                generation_key(result.generation_id, result.thread_id), 0, StagingKind.FINAL
            )
            if staged is None:
                raise ThreadError("not_found", "the generation's output is no longer stored")
            message = staged.message
        value = output.parse(message.text) if output is not None else None
        return Generation(text=message.text, message=message, result=result, output=value)

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


def _request_id(value: object) -> str:
    """`value` if it can be a request id; a malformed one is refused before any query."""
    return check_wire_id(value, "request id", limit=MAX_REQUEST_ID_LENGTH)
