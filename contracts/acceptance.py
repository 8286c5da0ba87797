"""The acceptance gate's activities and success hooks across Temporal (content-free).

Three activities make the gate: `crux.check_input` runs input safety on the staged user
turn before anything is planned, `crux.check_output` runs terminal safety and the
constraints on a final reply before the commit, and `crux.run_success_hook` runs one
success hook after the commit. Their payloads carry ids, specs and reports; the texts stay
in PostgreSQL, where the activities read (and replace) them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._compact import CompactWireModel
from contracts.gate import ConstraintSpec, PolicySpec
from vocabulary.commits import WireModel
from vocabulary.gate import ConstraintReport, GateReport

# Activity names are persisted in histories: they stay as they are (see the versioning
# policy in the docs). `contracts.stubs` types each one.
ACTIVITY_CHECK_INPUT = "crux.check_input"
ACTIVITY_CHECK_OUTPUT = "crux.check_output"
ACTIVITY_RUN_SUCCESS_HOOK = "crux.run_success_hook"


class CheckInputInput(CompactWireModel):
    """Run input safety on the generation's staged user turn.

    Attributes:
        generation_id: The generation.
        thread_id: Its Thread (`None` ad hoc).
        model: The generation's model, whose tokenizer measures the turn.
        policies: The input policies, in order.
    """

    generation_id: str
    thread_id: str | None = None
    model: str
    policies: tuple[PolicySpec, ...]


class CheckInputResult(CompactWireModel):
    """What input safety decided, and the user turn's size as it now stands.

    Attributes:
        report: The policies' decisions, content-free.
        turn_tokens: Content tokens of the staged user turn after the policies (measured
            again when one transformed it; what the plan must count).
    """

    report: GateReport
    turn_tokens: int = Field(default=0, ge=0)


class CheckOutputInput(CompactWireModel):
    """Judge one attempt's staged final reply: terminal safety, then the constraints.

    Attributes:
        generation_id: The generation.
        thread_id: Its Thread (`None` ad hoc).
        model: The generation's model, whose tokenizer measures the reply.
        attempt: The attempt whose staged output is judged.
        request_id: The request that produced it (its receipt records the verdict).
        policies: The output policies, in order (empty: no terminal safety).
        constraints: The constraints (empty: none).
        stream: The attempt streamed deltas, withdrawn with a refused reply.
    """

    generation_id: str
    thread_id: str | None = None
    model: str
    attempt: int
    request_id: str
    policies: tuple[PolicySpec, ...] = ()
    constraints: tuple[ConstraintSpec, ...] = ()
    stream: bool = False


class CheckOutputResult(CompactWireModel):
    """The gate's verdict on a reply, content-free.

    Attributes:
        safety: The output policies' report; `None` when none is configured.
        constraints: The constraints' report; `None` when none is configured or safety
            refused the reply first.
        withdrawn: The reply was refused and removed from staging (with its deltas).
    """

    safety: GateReport | None = None
    constraints: ConstraintReport | None = None
    withdrawn: bool = False

    @property
    def violations(self) -> tuple[str, ...]:
        """The constraint violations as `<index>:<code>`."""
        if self.constraints is None:
            return ()
        return tuple(f"{v.index}:{v.code}" for v in self.constraints.violations)


class SuccessContext(WireModel):
    """What a success hook is told about the committed turn: ids and figures, never text.

    Attributes:
        hook: The hook's registered name.
        generation_id: The caller's generation id.
        idempotency_key: The key a hook gives downstream systems so that its at-least-once
            runs count once: the generation's id scoped to its Thread (`<thread>/<id>`,
            each part percent-encoded; the generation id itself for an ad-hoc
            generation). The same for every try of every hook of the generation.
        thread_id: The Thread the turn was committed to (`None` ad hoc).
        output_message_id: The committed assistant message (read it from the Thread, or
            from the generation's result).
        commit_status: `selected` or `alternative`; `None` for an ad-hoc generation.
        model: The generation's model.
        prompt_id: The prompt it rendered.
        agent_id: The agent it ran, if any.
        input_tokens: Input tokens over every provider call of the turn.
        output_tokens: Output tokens over them.
        attempt: This try of the hook (1 on the first; a retry or a worker lost mid-hook
            runs it again).
    """

    hook: str
    generation_id: str
    idempotency_key: str
    thread_id: str | None = None
    output_message_id: str
    commit_status: Literal["selected", "alternative"] | None = None
    model: str
    prompt_id: str
    agent_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    attempt: int = 1


class RunSuccessHookInput(CompactWireModel):
    """Run one success hook on the committed turn's content-free context."""

    context: SuccessContext


class RunSuccessHookResult(CompactWireModel):
    """A success hook that returned: which try it was."""

    attempt: int = 1


class SuccessHookOutcome(WireModel):
    """How one success hook ended (the turn stays committed either way).

    Attributes:
        hook: The hook's name.
        status: `ok` (it returned) or `failed` (it raised on every try, or is not
            registered on the worker).
        error_type: The class name of the exception of its last try, when it failed
            (`not_registered` for a hook the worker does not know).
        attempts: How many times it ran.
    """

    hook: str
    status: Literal["ok", "failed"]
    error_type: str | None = None
    attempts: int = Field(default=1, ge=0)


__all__ = [
    "ACTIVITY_CHECK_INPUT",
    "ACTIVITY_CHECK_OUTPUT",
    "ACTIVITY_RUN_SUCCESS_HOOK",
    "CheckInputInput",
    "CheckInputResult",
    "CheckOutputInput",
    "CheckOutputResult",
    "RunSuccessHookInput",
    "RunSuccessHookResult",
    "SuccessContext",
    "SuccessHookOutcome",
]
