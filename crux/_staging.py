"""A built call, and how its texts are staged in PostgreSQL before its workflow starts.

The builder (`crux._request`) turns a public call into a `BuiltCall`; `stage_call` claims
the generation id for exactly that request and stages the rendered turn and any messages
that shadow the Thread, so the workflow receives ids only.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.rendering import RenderedTurn
from contracts.generation import GenerationInput, request_fingerprint
from crux.output import Output
from crux.prompts import Prompt
from storage import GenerationStore
from vocabulary.errors import ThreadError
from vocabulary.ids import generation_key
from vocabulary.messages import Message
from vocabulary.staging import StagingKind


@dataclass(frozen=True)
class BuiltCall:
    """A validated call: what the workflow gets (ids only) and what is staged for it.

    Attributes:
        prompt: The prompt (a string prompt made into one).
        request: The ids-only workflow input.
        turn: The rendered user turn, system text and context sources.
        caller: Call-site messages, when given (they shadow everything else).
        declared: Prompt-level messages, when they shadow the Thread.
        output: The structured output the reply is parsed into, if any.
    """

    prompt: Prompt
    request: GenerationInput
    turn: RenderedTurn
    caller: list[Message] | None
    declared: list[Message] | None
    output: Output | None = None

    @property
    def transcript(self) -> list[Message] | None:
        """The message array that shadows the Thread, if any."""
        return self.caller if self.caller is not None else self.declared

    def fingerprint(self) -> str:
        """The content-free fingerprint that ties the generation id to this request."""
        return request_fingerprint(
            self.request,
            [
                *([kind, message.model_dump(mode="json")] for kind, message in self.turn.staged()),
                *([m.model_dump(mode="json") for m in self.caller] if self.caller else []),
                *(
                    [
                        [StagingKind.PROMPT_MESSAGES, m.model_dump(mode="json")]
                        for m in self.declared
                    ]
                    if self.declared is not None
                    else []
                ),
            ],
        )


async def stage_call(call: BuiltCall, generations: GenerationStore) -> bool:
    """Claim the generation id for this request and stage its texts.

    Returns:
        Whether the generation completed before: its run replays the stored result.

    Raises:
        ThreadError: `identity_conflict` when the id was used for a different request in
            the same scope.
    """
    request = call.request
    key = generation_key(request.generation_id, request.thread_id)
    thread_id = request.thread_id
    fingerprint = call.fingerprint()
    rows: list[tuple[str, Message | list[Message]]] = list(call.turn.staged())
    if call.caller is not None:
        rows.append((StagingKind.CALLER_MESSAGES, call.caller))
    elif call.declared is not None:
        rows.append((StagingKind.PROMPT_MESSAGES, call.declared))
    claimed, stored = await generations.claim_and_stage(key, fingerprint, rows, thread_id=thread_id)
    if claimed:
        return False
    if stored != fingerprint:
        raise ThreadError(
            "identity_conflict",
            "this generation_id was already used with a different request",
            thread_id=thread_id,
        )
    if await generations.find_result(key) is not None:
        # A completed generation asked again: the workflow replays its stored result;
        # staging its text again would only leave rows nobody drops.
        return True
    # The same request again while its first call runs (or after it failed): the rows it
    # staged stay as they are (and are equal, by the fingerprint).
    await generations.stage_input(key, rows, thread_id=thread_id)
    return False
