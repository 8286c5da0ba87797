"""What the runtime hands back: generations, stream updates, and typed failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import WorkflowFailureError, WorkflowHandle

from contracts import failures
from contracts.acceptance import SuccessHookOutcome
from contracts.generation import GenerationInput, GenerationResult, StepRecord, Usage
from storage import GenerationStore
from vocabulary.commits import ThreadCommit
from vocabulary.details import ErrorDetails
from vocabulary.errors import CruxError, ThreadError
from vocabulary.ids import generation_key
from vocabulary.messages import Message


@dataclass(frozen=True)
class Generation:
    """The outcome of `Runtime.generate`.

    Attributes:
        text: The final assistant text.
        message: The final assistant message.
        result: The workflow's content-free result.
        output: The structured output, when the call asked for one: an instance of the
            pydantic model, or the parsed JSON value for a JSON schema; else `None`.
    """

    text: str
    message: Message
    result: GenerationResult
    output: Any = None

    @property
    def generation_id(self) -> str:
        """The generation id (also the idempotency key)."""
        return self.result.generation_id

    @property
    def thread_commit(self) -> ThreadCommit | None:
        """The Thread commit receipt, for managed generations."""
        return self.result.thread_commit

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        """One record per provider step; `steps[i].request` is the request receipt."""
        return self.result.steps

    @property
    def usage(self) -> Usage:
        """Total usage over the steps."""
        return self.result.usage

    @property
    def hooks(self) -> dict[str, SuccessHookOutcome]:
        """How each success hook ended, by name (`status` `ok` or `failed`, `error_type`).

        Empty without hooks, and for a replayed generation (its hooks ran with the run
        that committed it).
        """
        return {outcome.hook: outcome for outcome in self.result.hooks}


@dataclass(frozen=True)
class StreamDelta:
    """A piece of provider text (progress, not yet accepted).

    Attributes:
        text: The text.
        key: The delta's storage key: content-free, and ordered within the generation, so
            that a follower can resume after the last key it saw.
    """

    text: str
    key: str = ""


@dataclass(frozen=True)
class StreamReset:
    """Discard the text received so far: it will never be the accepted reply.

    Attributes:
        attempt: The provider attempt that begins (its text follows), or, for a
            withdrawal, the one whose text is withdrawn.
        withdrawn: `True` when no further text follows: the reply was refused (terminal
            safety blocked it, say) or the run failed, and the typed error comes next.
    """

    attempt: int
    withdrawn: bool = False


@dataclass(frozen=True)
class StreamCommitted:
    """The turn was published; `generation` is the accepted result."""

    generation: Generation


StreamUpdate = StreamDelta | StreamReset | StreamCommitted
"""What `Runtime.stream` yields."""


class Finished(BaseModel):
    """What the facade needs of a generation workflow's answer.

    The workflow returns ids and figures (`GenerationOutcome`); runs of earlier releases
    returned the complete `GenerationResult`. Both decode into this, and the complete
    result is then loaded from PostgreSQL, where the commit stored it.

    Attributes:
        generation_id: The caller's generation id.
        thread_id: The Thread, when managed.
        thread_commit: The commit receipt as this run reported it (replay flags included).
        replayed: `True` when the generation had already completed.
        hooks: How each success hook of the run ended.
        noticed: Learnt from the commit's notice (`crux._notices`) rather than from the
            workflow's answer: the stored result stands as committed. Never on the wire.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    generation_id: str
    thread_id: str | None = None
    thread_commit: ThreadCommit | None = None
    replayed: bool = False
    hooks: tuple[SuccessHookOutcome, ...] = ()
    noticed: bool = Field(default=False, exclude=True)

    @classmethod
    def from_notice(cls, request: GenerationInput) -> Finished:
        """The run of `request`, known to have committed from its commit's notice."""
        return cls(generation_id=request.generation_id, thread_id=request.thread_id, noticed=True)


async def await_result(handle: WorkflowHandle[Any, Finished]) -> Finished:
    """Wait for a generation workflow, turning its failure into the typed domain error."""
    try:
        return await handle.result()
    except WorkflowFailureError as failure:
        error = domain_error(failure)
        # The Temporal chain is left out; a cause the error carries itself (the provider
        # failure behind an unprepared summary) is kept.
        raise error from error.__cause__


async def stored_result(generations: GenerationStore, finished: Finished) -> GenerationResult:
    """The complete result of a finished generation, receipts included, from PostgreSQL.

    Raises:
        ThreadError: `not_found` when the result is no longer stored (its Thread was
            deleted since).
    """
    stored = await generations.find_result(
        generation_key(finished.generation_id, finished.thread_id)
    )
    return as_finished(stored, finished)


def as_finished(stored: GenerationResult | None, finished: Finished) -> GenerationResult:
    """The stored result with what the run reported of it (replay flags, hooks).

    Raises:
        ThreadError: `not_found` when no result is stored (its Thread was deleted since).
    """
    if stored is None:
        raise ThreadError("not_found", "the generation's result is no longer stored")
    if finished.noticed:
        return stored  # as committed: a fresh commit, no hooks (`settled_at_commit`)
    return stored.model_copy(
        update={
            "replayed": finished.replayed,
            "thread_commit": finished.thread_commit,
            "hooks": finished.hooks,
        }
    )


def domain_error(failure: WorkflowFailureError) -> CruxError:
    """Rebuild the typed domain error from a workflow failure's cause chain.

    Always a `CruxError` (the registry in `vocabulary.failures` says how each family is
    rebuilt): a failure nobody classified becomes `GenerationFailedError`, so no
    `WorkflowFailureError` reaches the caller.
    """
    return failures.domain_error(failure)


def rebuild_error(
    error_type: str | None, message: str, details: ErrorDetails, *, non_retryable: bool = True
) -> CruxError:
    """The typed domain error of a recorded failure (its type, message and details).

    A failure recorded by a workflow (a parallel member's, say) is rebuilt exactly as a
    workflow failure would be: a type nobody classified becomes `GenerationFailedError`.
    """
    return failures.rebuilt_from(error_type, message, details, non_retryable=non_retryable)
