"""The parallel workflow's input and result: members as generation inputs, outcomes as ids.

`ParallelGenerationWorkflow` runs each member as a child `ManagedGenerationWorkflow`. Its
input names every member's ids-only `GenerationInput` (the facade staged the texts in
PostgreSQL beforehand); its result holds, per member, either the child's outcome (ids and
figures) or a content-free failure record that the facade turns back into the typed error.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from contracts.generation import GenerationInput, GenerationOutcome
from vocabulary.commits import WireModel
from vocabulary.details import ErrorDetails
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_MEMBER_NAME_LENGTH,
    MAX_PARALLEL_ID_LENGTH,
    check_wire_id,
)

MAX_PARALLEL_MEMBERS = 32
"""Most members one parallel run accepts (each is a child workflow)."""


class ParallelMember(WireModel):
    """One member of a parallel run.

    Attributes:
        name: The member's name (the key of its result).
        generation: Its ids-only generation input (`composition` names the parent).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    name: str = Field(min_length=1, max_length=MAX_MEMBER_NAME_LENGTH)
    generation: GenerationInput

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_wire_id(value, "member name", limit=MAX_MEMBER_NAME_LENGTH)


class ParallelInput(WireModel):
    """Input of `ParallelGenerationWorkflow`.

    Attributes:
        parallel_id: The caller's id of the run (its idempotency key).
        members: The members, each run as its own child generation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    parallel_id: str = Field(min_length=1, max_length=MAX_PARALLEL_ID_LENGTH)
    members: list[ParallelMember] = Field(min_length=1, max_length=MAX_PARALLEL_MEMBERS)

    @field_validator("parallel_id")
    @classmethod
    def _parallel_id(cls, value: str) -> str:
        return check_wire_id(value, "parallel id", limit=MAX_PARALLEL_ID_LENGTH)

    @model_validator(mode="after")
    def _distinct(self) -> ParallelInput:
        names = [member.name for member in self.members]
        if len(set(names)) != len(names):
            raise ConfigurationError("member names must be distinct")
        return self


FailureKind = Literal["error", "cancelled", "terminated", "timed_out", "already_running"]


class MemberFailure(WireModel):
    """Why a member failed, content-free: the typed error's type, message and details.

    Attributes:
        kind: `error` for a typed failure (see `error_type`), else how the child ended
            without one: `cancelled`, `terminated`, `timed_out`, or `already_running` (a
            run of the same member, left by an earlier parent, still holds its id).
        error_type: The `ApplicationError` type (a `vocabulary.errors.ErrorType` value).
        message: The error's message as the worker composed it (ids, codes and figures).
        non_retryable: Whether the failure was marked non-retryable.
        details: The error's codes, ids and figures.
    """

    kind: FailureKind = "error"
    error_type: str | None = None
    message: str = ""
    non_retryable: bool = True
    details: ErrorDetails = ErrorDetails()


class MemberOutcome(WireModel):
    """What became of one member: its outcome or its failure.

    Attributes:
        name: The member's name.
        workflow_id: The member's child workflow id.
        generation_id: The member's generation id.
        thread_id: The member's Thread, when managed.
        outcome: The child's outcome, when it completed.
        failure: The failure record, when it did not.
    """

    name: str
    workflow_id: str
    generation_id: str
    thread_id: str | None = None
    outcome: GenerationOutcome | None = None
    failure: MemberFailure | None = None


class ParallelOutcome(WireModel):
    """What `ParallelGenerationWorkflow` returns: one record per member, in input order.

    Attributes:
        parallel_id: The caller's id of the run.
        members: One record per member.
    """

    parallel_id: str
    members: tuple[MemberOutcome, ...] = ()
