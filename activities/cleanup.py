"""Cleanup of staged text: the failure path of a generation removes what it staged.

Staged rows hold user text, call-site messages, context documents and provider output
only while a generation is in flight; a run that ends without publishing must not leave
them behind. What no failure path reaches is swept by age (`crux db sweep`, the worker's
periodic sweep).
"""

from __future__ import annotations

from activities._errors import maps_errors
from activities._implements import implements
from contracts import stubs
from contracts.activities import DiscardGenerationInput, DiscardGenerationResult
from storage import GenerationStore
from telemetry.logs import get_logger
from vocabulary.ids import generation_key

_log = get_logger(__name__)


class StagingCleanup:
    """Activities that remove staged content.

    Args:
        generations: Generation staging.
    """

    def __init__(self, generations: GenerationStore) -> None:
        self._generations = generations

    @implements(stubs.discard_generation)
    @maps_errors
    async def discard_generation(self, request: DiscardGenerationInput) -> DiscardGenerationResult:
        """Delete everything staged for a generation that produced no turn."""
        key = generation_key(request.generation_id, request.thread_id)
        deleted = await self._generations.discard_unfinished(
            key, request.thread_id, refused=request.refused
        )
        _log.info(
            "generation.staging.discarded",
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            rows=deleted,
        )
        return DiscardGenerationResult(deleted=deleted)
