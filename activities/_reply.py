"""The reply text in a generation's outcome, for clients that asked for it (`include_reply`).

The text goes into Temporal history with the outcome, so it is given only when the worker
encrypts payloads (a payload codec on its client); a worker without one refuses the
request before anything is staged or sent.
"""

from __future__ import annotations

from temporalio import activity

from contracts.generation import GenerationOutcome, GenerationResult
from storage import GenerationStore, ThreadStore
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.ids import generation_key
from vocabulary.messages import Message
from vocabulary.staging import StagingKind


def check_reply_encrypted() -> None:
    """Refuse `include_reply` on a worker whose payloads are not encrypted.

    Raises:
        ConfigurationError: The worker's client has no payload codec.
    """
    if activity.client().data_converter.payload_codec is None:
        raise ConfigurationError(
            "include_reply puts the reply text into Temporal history: it needs the "
            "encryption payload codec on the worker (CRUX_CODEC_KEYS or CRUX_CODEC_KEY_FILE)"
        )


async def with_reply(
    outcome: GenerationOutcome,
    result: GenerationResult,
    *,
    threads: ThreadStore,
    generations: GenerationStore,
) -> GenerationOutcome:
    """`outcome` with the text of `result`'s final message (`None` when no longer stored)."""
    output = await stored_output(result, threads=threads, generations=generations)
    return outcome.model_copy(update={"reply": output.text if output is not None else None})


async def stored_output(
    result: GenerationResult, *, threads: ThreadStore, generations: GenerationStore
) -> Message | None:
    """A completed generation's final message: its Thread's, or the one kept ad hoc.

    `None` when it is no longer stored: redacted, its Thread deleted, an ad-hoc reply erased.
    """
    if result.thread_commit is not None and result.thread_id is not None:
        try:
            [message] = await threads.load_messages(result.thread_id, [result.output_message_id])
        except ThreadError:
            return None
        return message
    staged = await generations.get_staged(
        generation_key(result.generation_id, result.thread_id), 0, StagingKind.FINAL
    )
    return None if staged is None else staged.message
