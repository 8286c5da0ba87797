"""Staging a user turn for a plain Temporal client: the rows behind `input_ref`.

The turn is staged exactly as the facade stages it (`crux._staging`): under the
generation's own storage key, the user message with its derived id, optional system text
and call-site messages. The generation's identity is claimed with a content-free
fingerprint of what was staged, so the same id staged again with other text is
`identity_conflict`, and staged again after it completed is a replay.
"""

from __future__ import annotations

import hashlib
import json

from crux.serve._models import StagedInput, StageRequest, StartFields
from crux.serve._tenancy import Scoped
from storage import GenerationStore
from vocabulary.errors import ThreadError
from vocabulary.ids import user_message_id, workflow_id_for
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

_FINGERPRINT_VERSION = "crux.staged-input.v1"


def _fingerprint(user: Message, system: Message | None, messages: list[Message] | None) -> str:
    """A content-free digest of what is staged (the text itself is never stored here)."""
    parts = [
        _FINGERPRINT_VERSION,
        user.model_dump(mode="json"),
        system.model_dump(mode="json") if system is not None else None,
        [m.model_dump(mode="json") for m in messages] if messages is not None else None,
    ]
    encoded = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(encoded.encode()).hexdigest()


async def stage_turn(
    generations: GenerationStore, scoped: Scoped, body: StageRequest
) -> StagedInput:
    """Stage the turn of `body` for the generation `scoped`; say how to start it.

    Raises:
        ThreadError: `identity_conflict` when the generation id was used with other
            content; `invalid_message` for text PostgreSQL cannot store.
    """
    key = scoped.key
    user = Message(id=user_message_id(scoped.generation_id), role="user", content=body.message)
    system = Message(role="system", content=body.system) if body.system is not None else None
    fingerprint = _fingerprint(user, system, body.messages)
    rows: list[tuple[str, Message | list[Message]]] = [(StagingKind.USER, user)]
    if system is not None:
        rows.append((StagingKind.SYSTEM, system))
    if body.messages is not None:
        rows.append((StagingKind.CALLER_MESSAGES, list(body.messages)))
    claimed, stored = await generations.claim_and_stage(
        key, fingerprint, rows, thread_id=scoped.thread_id
    )
    if not claimed and stored != fingerprint:
        raise ThreadError(
            "identity_conflict", "this generation_id was already used with a different request"
        )
    replayed = not claimed and await generations.find_result(key) is not None
    if not claimed and not replayed:
        # Idempotent: a row staged before is kept as it is (and equal, by the fingerprint).
        await generations.stage_input(key, rows, thread_id=scoped.thread_id)
    return StagedInput(
        input_ref=key,
        workflow_id=workflow_id_for(scoped.generation_id, scoped.thread_id),
        start=StartFields(
            generation_id=scoped.generation_id,
            thread_id=scoped.thread_id,
            input_ref=key,
            messages_ref=key if body.messages is not None else None,
        ),
        replayed=replayed,
    )
