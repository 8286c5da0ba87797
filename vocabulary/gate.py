"""What the acceptance gate reports: decisions, names, codes and counts, never text.

The gate's policies (`contracts.gate` specs, run by `activities.gate`) and constraints
report here; the request receipt (`planner.receipt.RequestReceipt`) carries these reports,
which is why they live at the leaf of the import graph.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vocabulary.commits import WireModel

PolicyStage = Literal["input", "output"]
"""Where a gate runs: on the caller's text, or on the final reply."""
GateDecision = Literal["allow", "transform", "block", "retry"]
"""A policy's decision; `retry` is for output policies only."""
PolicyKind = Literal["pii", "length", "deny_list", "custom"]
"""The kinds of policy."""
ConstraintKind = Literal["length", "pattern", "required", "forbidden"]
"""The kinds of constraint."""


class PolicyOutcome(WireModel):
    """What one policy decided, content-free.

    Attributes:
        policy: The policy's name.
        kind: Its kind.
        decision: `allow`, `transform`, `block` or `retry`.
        reason_code: Why, for anything but `allow` (`pii.email`, `length.exceeded`,
            `deny_list.match`, or a custom policy's code).
        counts: What was found or measured, by name (`{"email": 2, "card": 1}`,
            `{"chars": 5120, "max_chars": 4000}`, `{"matches": 3}`).
        entries: Indices of the deny-list entries that matched (words, then patterns).
        chars_before: The text's length in characters when the policy ran.
        chars_after: Its length after the policy (changes only on `transform`).
    """

    policy: str
    kind: PolicyKind
    decision: GateDecision
    reason_code: str | None = None
    counts: dict[str, int] = Field(default_factory=dict[str, int])
    entries: tuple[int, ...] = ()
    chars_before: int = Field(ge=0)
    chars_after: int = Field(ge=0)


class GateReport(WireModel):
    """The content-free record of one gate run; the resulting text travels separately.

    Attributes:
        stage: `input` or `output`.
        decision: `block` or `retry` if a policy stopped the run, else `transform` if any
            policy masked, else `allow`.
        policy: The policy that stopped the run, if one did.
        reason_code: Its reason code, if one stopped the run.
        outcomes: Every policy that ran, in order (none after the one that stopped).
    """

    stage: PolicyStage
    decision: GateDecision
    policy: str | None = None
    reason_code: str | None = None
    outcomes: tuple[PolicyOutcome, ...] = ()

    @property
    def accepted(self) -> bool:
        """Whether the text may go on (`allow` or `transform`)."""
        return self.decision in ("allow", "transform")


class ConstraintViolation(WireModel):
    """One constraint the text fails, content-free.

    Attributes:
        index: The constraint's position in the list checked.
        kind: Its kind.
        code: `length.too_short`, `length.too_long`, `pattern.no_match`,
            `pattern.text_too_long`, `required.missing` or `forbidden.present`.
        counts: The figures (`{"chars": 12, "minimum": 40}`, `{"missing": 2}`).
        entries: Indices of the substrings missing (required) or present (forbidden).
    """

    index: int = Field(ge=0)
    kind: ConstraintKind
    code: str
    counts: dict[str, int] = Field(default_factory=dict[str, int])
    entries: tuple[int, ...] = ()


class ConstraintReport(WireModel):
    """The violations of a list of constraints (empty when the text satisfies all).

    Attributes:
        checked: How many constraints were evaluated.
        violations: The failed ones, in list order.
    """

    checked: int = Field(ge=0)
    violations: tuple[ConstraintViolation, ...] = ()

    @property
    def satisfied(self) -> bool:
        """Whether the text satisfies every constraint."""
        return not self.violations


__all__ = [
    "ConstraintKind",
    "ConstraintReport",
    "ConstraintViolation",
    "GateDecision",
    "GateReport",
    "PolicyKind",
    "PolicyOutcome",
    "PolicyStage",
]
