"""The errors of the acceptance gate and of the time budget (all content-free).

```
CruxError
├── SafetyError(policy, reason_code, stage)     a safety policy refused the turn or the reply
├── ConstraintError(violations)                 every reply violated a constraint
├── GatePolicyError(policy, code)               a custom policy could not decide
├── SuccessHookError(hook, code)                a success hook failed (the turn stays committed)
└── GenerationTimeoutError(committed)           the generation's time budget expired
```

Messages name policies, reason codes, counts and the setting that changes the outcome,
never the text a policy looked at. How each family crosses Temporal is declared in
`vocabulary.failures`.
"""

from __future__ import annotations

from typing import Literal

from vocabulary.errors import CruxError

GateStage = Literal["input", "output"]
"""Where a safety policy refused: the user turn, or the final reply."""

GatePolicyErrorCode = Literal["not_registered", "raised", "invalid_result"]
"""Why a custom policy could not decide."""

SuccessHookErrorCode = Literal["not_registered", "raised"]
"""Why a success hook failed."""


class SafetyError(CruxError):
    """A safety policy refused the user turn or the reply; nothing was committed.

    On input nothing was sent either, and the staged turn was removed. On output the reply
    was withdrawn (streamed deltas included); a policy that asked for a corrective attempt
    more often than `max_retries` allows ends here too.

    Attributes:
        policy: The policy's name.
        reason_code: Why, as the policy's content-free code (`pii.card`,
            `deny_list.match`, `length.exceeded`, or a custom policy's code).
        stage: `input` (the user turn) or `output` (the reply).
        attempts: Replies refused, on output (0 on input).
        request_id: The request whose reply was refused last, on output.
    """

    def __init__(
        self,
        policy: str,
        reason_code: str | None,
        *,
        stage: GateStage,
        attempts: int = 0,
        request_id: str | None = None,
    ) -> None:
        code = reason_code or "blocked"
        if stage == "input":
            text = (
                f"input safety policy {policy} refused the user turn ({code});"
                " nothing was sent or committed"
            )
        else:
            text = (
                f"output safety policy {policy} refused the reply ({code}) after {attempts}"
                " attempt(s); nothing was committed (raise the safety max_retries to allow"
                " more corrective attempts)"
            )
        super().__init__(text)
        self.policy = policy
        self.reason_code = code
        self.stage: GateStage = stage
        self.attempts = attempts
        self.request_id = request_id


class ConstraintError(CruxError):
    """Every reply violated a constraint, through every corrective attempt; nothing committed.

    Attributes:
        violations: The last reply's violations as `<index>:<code>` (`0:length.too_long`,
            `2:required.missing`): the constraint's position and what failed.
        attempts: Replies that violated a constraint.
        request_id: The request whose reply was refused last.
    """

    def __init__(
        self,
        violations: tuple[str, ...],
        *,
        attempts: int = 0,
        request_id: str | None = None,
    ) -> None:
        shown = ", ".join(violations[:4]) + (", ..." if len(violations) > 4 else "")
        super().__init__(
            f"the reply violated its constraints {attempts} time(s): {shown}; nothing was"
            " committed (raise the constraints' max_retries or relax them)"
        )
        self.violations = violations
        self.attempts = attempts
        self.request_id = request_id


class GatePolicyError(CruxError):
    """A custom policy is not registered on the worker, raised, or returned no verdict.

    A failing policy is an error rather than a `block`: a bug in a policy must not pass
    for a decision about the text, and the caller decides whether to fail closed. The
    message names the policy, the code and the exception's type, never its message (it
    may quote the text), and the exception is not chained for the same reason.

    Attributes:
        policy: The policy's name.
        code: `not_registered`, `raised` or `invalid_result`.
        error_type: The class name of the exception the policy raised, for `raised`.
    """

    def __init__(
        self, policy: str, code: GatePolicyErrorCode, *, error_type: str | None = None
    ) -> None:
        cause = f" ({error_type})" if error_type else ""
        remedy = " (register it on the worker: policies=[...])" if code == "not_registered" else ""
        super().__init__(f"{code}: gate policy {policy}{cause}{remedy}")
        self.policy = policy
        self.code: GatePolicyErrorCode = code
        self.error_type = error_type


class SuccessHookError(CruxError):
    """A success hook failed. The turn it followed stays committed.

    Raised on the worker, where Temporal retries the hook within its bounded policy; what
    the generation finally reports is the hook's outcome (`Generation.hooks`), not this
    error.

    Attributes:
        hook: The hook's name.
        code: `not_registered` (no hook of that name on the worker) or `raised`.
        error_type: The class name of the exception the hook raised, for `raised`.
    """

    def __init__(
        self, hook: str, code: SuccessHookErrorCode, *, error_type: str | None = None
    ) -> None:
        cause = f" ({error_type})" if error_type else ""
        super().__init__(f"{code}: success hook {hook}{cause}")
        self.hook = hook
        self.code: SuccessHookErrorCode = code
        self.error_type = error_type


class GenerationTimeoutError(CruxError):
    """The generation's time budget (`time_budget_seconds`) expired.

    Provider attempts, tool rounds and every other step before the commit stop when the
    budget expires. A commit already in flight is never abandoned: the run waits for it,
    and `committed` says whether the turn was published (a later call with the same
    generation id returns it).

    Attributes:
        committed: Whether the turn was committed before the run ended.
        budget_seconds: The budget that expired.
        stage: The stage the run was in when the budget expired.
    """

    def __init__(self, *, committed: bool, budget_seconds: float, stage: str | None = None) -> None:
        where = f" during {stage}" if stage else ""
        if committed:
            outcome = "the turn was committed (call again with the same generation_id to read it)"
        else:
            outcome = "nothing was committed (raise time_budget_seconds to allow more time)"
        super().__init__(f"the time budget of {budget_seconds:g} s expired{where}; {outcome}")
        self.committed = committed
        self.budget_seconds = budget_seconds
        self.stage = stage


__all__ = [
    "ConstraintError",
    "GatePolicyError",
    "GatePolicyErrorCode",
    "GateStage",
    "GenerationTimeoutError",
    "SafetyError",
    "SuccessHookError",
    "SuccessHookErrorCode",
]
