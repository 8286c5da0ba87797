"""A gate: its policies built once, run in order over any number of texts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from activities.gate._custom import CustomPolicyRunner
from activities.gate._deny import DenyListPolicy
from activities.gate._errors import GatePolicyError
from activities.gate._length import LengthPolicy
from activities.gate._pii import PiiPolicy
from activities.gate._verdicts import CompiledPolicy, CustomPolicy, TokenCount
from contracts.gate import (
    DenyListPolicySpec,
    GateReport,
    LengthPolicySpec,
    PiiPolicySpec,
    PolicyOutcome,
    PolicySpec,
    PolicyStage,
    check_policies,
)


@dataclass(frozen=True, slots=True)
class GateRun:
    """The result of one gate run.

    Attributes:
        text: The text after every transform (the input when nothing changed). Content:
            it goes where the caller's text goes, never into a report or a log.
        report: The content-free report.
    """

    text: str
    report: GateReport


class Gate:
    """Policies built from their specs, for one stage.

    Build it once per set of specs (patterns are compiled, regions and custom functions
    looked up here) and call `run` per text. Running is pure: no I/O, no clock, no
    randomness; the same text and specs give the same `GateRun`.

    Args:
        specs: The policies, in the order they run.
        stage: `input` (the caller's text) or `output` (the final reply).
        custom: The custom policy functions registered on this worker, by name.

    Attributes:
        stage: The stage the gate was built for.
        specs: The policies, in order.

    Raises:
        ConfigurationError: The specs do not form a legal gate for `stage` (see
            `contracts.gate.check_policies`), a pattern has a refused shape, or the
            phone region is unknown.
        GatePolicyError: A custom policy is not registered (`not_registered`).
    """

    def __init__(
        self,
        specs: Iterable[PolicySpec],
        *,
        stage: PolicyStage,
        custom: Mapping[str, CustomPolicy] | None = None,
    ) -> None:
        self.stage: PolicyStage = stage
        self.specs = check_policies(specs, stage)
        self._policies = [self._build(spec, custom or {}) for spec in self.specs]

    def _build(self, spec: PolicySpec, custom: Mapping[str, CustomPolicy]) -> CompiledPolicy:
        if isinstance(spec, PiiPolicySpec):
            return PiiPolicy(spec)
        if isinstance(spec, LengthPolicySpec):
            return LengthPolicy(spec)
        if isinstance(spec, DenyListPolicySpec):
            return DenyListPolicy(spec)
        function = custom.get(spec.name)
        if function is None:
            raise GatePolicyError(spec.name, "not_registered")
        return CustomPolicyRunner(spec.name, function, self.stage)

    def run(self, text: str, *, count_tokens: TokenCount | None = None) -> GateRun:
        """Run the policies in order; a transform feeds the next, a block or retry stops.

        Args:
            text: The text to check.
            count_tokens: The model's token counter, needed by token limits.

        Raises:
            ConfigurationError: A token limit and no `count_tokens`.
            GatePolicyError: A custom policy raised or returned no valid verdict.
        """
        outcomes: list[PolicyOutcome] = []
        transformed = False
        for spec, policy in zip(self.specs, self._policies, strict=True):
            applied = policy.apply(text, count_tokens)
            outcomes.append(
                PolicyOutcome(
                    policy=spec.name,
                    kind=spec.kind,
                    decision=applied.decision,
                    reason_code=applied.reason_code,
                    counts=applied.counts,
                    entries=applied.entries,
                    chars_before=len(text),
                    chars_after=len(applied.text),
                )
            )
            if applied.decision in ("block", "retry"):
                report = GateReport(
                    stage=self.stage,
                    decision=applied.decision,
                    policy=spec.name,
                    reason_code=applied.reason_code,
                    outcomes=tuple(outcomes),
                )
                return GateRun(text, report)
            transformed = transformed or applied.decision == "transform"
            text = applied.text
        decision = "transform" if transformed else "allow"
        return GateRun(
            text, GateReport(stage=self.stage, decision=decision, outcomes=tuple(outcomes))
        )


def run_gate(
    text: str,
    specs: Iterable[PolicySpec],
    *,
    stage: PolicyStage,
    count_tokens: TokenCount | None = None,
    custom: Mapping[str, CustomPolicy] | None = None,
) -> GateRun:
    """Build a `Gate` and run it once (see `Gate` and `Gate.run`)."""
    return Gate(specs, stage=stage, custom=custom).run(text, count_tokens=count_tokens)
